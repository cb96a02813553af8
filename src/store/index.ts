export { openStore, storeHealthy, SCHEMA_VERSION, StoreError, type Store } from './open.ts';
export * from './records.ts';
export * from './users.ts';
export * from './tokens.ts';
export * from './modules.ts';
export { newId } from './ids.ts';
