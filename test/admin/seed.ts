// Moved to bench/harness/ (bench/console.ts seeds with it too, and bench/ does not import test/).
export * from '../../bench/harness/seed.ts';
