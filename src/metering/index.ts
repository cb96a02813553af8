export * from './periods.ts';
export * from './usage.ts';
