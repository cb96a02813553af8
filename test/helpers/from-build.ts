// The harness lives in bench/harness/ (the benches use it too, and bench/ does not import test/).
export * from '../../bench/harness/from-build.ts';
