// The store's surface: the interface both implementations answer, cut into the roles its
// callers use (backend.ts), the records and rules they share, and how a process opens the
// configured one (select.ts). Nothing of either implementation: the tools that work on one
// store's own files (the CLI's backup, restore and db migrate; benches that seed an LMDB store)
// import store/lmdb/index.ts or store/pg/index.ts, the only nested surfaces the dependency test
// allows.
export * from './records.ts';
export * from './backend.ts';
export * from './periods.ts';
export * from './errors.ts';
export * from './token-rules.ts';
export { quotaRefusal, type QuotaExceeded } from './quota.ts';
export { newId } from './ids.ts';
export { RefusalTally, REFUSAL_TALLY_BUCKET_MS, REFUSAL_TALLY_MAX_KEYS, MANY_CLIENTS, type RowLost } from './refusal-tally.ts';
// The store a process of the service opens from its configuration (LMDB or PostgreSQL), as
// the server, its workers and the CLI do; tests open it the same way to make tokens in-process.
export { openConfiguredStore, storeWriterChannel } from './select.ts';

export { MAX_SESSION_CAPTURES, MAX_SESSION_TTL_SECONDS, deviceSessionState, deviceSessionUsable } from './device-sessions.ts';
export type { DeviceSession, DeviceSessionState } from './device-sessions.ts';
export { currentProcess, holderAlive, holderState, type ProcessIdentity } from './owner.ts';
export { makeDataDir, privateDataDir, privateUmask } from './private-data.ts';
export { removeKilledRestores } from './leftovers.ts';
export { noteStoreRecovered, onStoreRecovered, storeDownSince, storeRecoveries, type StoreRecovery } from './outages.ts';
export { isLmdbCommitRejection, isStorageFailure, onStoreWriteFailure, storeWritesFailing } from './write-health.ts';
