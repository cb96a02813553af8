// The store's surface: the interface both implementations answer (backend.ts), the records
// and rules they share, and how a process opens the configured one (select.ts).
export * from './records.ts';
export * from './backend.ts';
export * from './periods.ts';
export * from './errors.ts';
export * from './token-rules.ts';
export { quotaRefusal, type QuotaExceeded } from './quota.ts';
export { newId } from './ids.ts';
export { RefusalTally, REFUSAL_TALLY_BUCKET_MS, REFUSAL_TALLY_MAX_KEYS, MANY_CLIENTS, type RowLost } from './refusal-tally.ts';
// The LMDB store's operations, for tests, benchmarks and the CLI that work on one LMDB store
// directly; everything else goes through StoreBackend.
export { openStore, storeHealthy, SCHEMA_VERSION, type Store } from './lmdb/open.ts';
export * from './lmdb/users.ts';
export * from './lmdb/tokens.ts';
export * from './lmdb/modules.ts';
export { appendLedger, listLedger, verifyLedger } from './lmdb/ledger.ts';
export { reserve } from './lmdb/reserve.ts';
export { settle, refund, resolveReservation, SettlementError } from './lmdb/settle.ts';
export { pruneIdempotency } from './lmdb/idempotency.ts';
export { writeAudit, listAudit } from './lmdb/audit.ts';
export { dailyTotals, ensureDailyTotals } from './lmdb/daily-totals.ts';
export { ensureByTokenIndex } from './lmdb/by-token.ts';
export { counterKey, usedUnits, usageRecord, usageSnapshot } from './lmdb/usage.ts';
// The store a process of the service opens from its configuration (LMDB or PostgreSQL), as
// the server, its workers and the CLI do; tests open it the same way to make tokens in-process.
export { openConfiguredStore } from './select.ts';

export { MAX_SESSION_CAPTURES, MAX_SESSION_TTL_SECONDS, deviceSessionState, deviceSessionUsable } from './device-sessions.ts';
export type { DeviceSession, DeviceSessionState } from './device-sessions.ts';
export { BackupError, backupStore, keysBesideBackup, restoreStore, type PreparedKeys } from './lmdb/backup.ts';
export { currentProcess, holderAlive } from './owner.ts';
export type { PgBackend } from './pg/index.ts';
export { MIGRATIONS } from './pg/migrations.ts';
export { privateDataDir, privateUmask } from './private-data.ts';
export { noteStoreRecovered, onStoreRecovered, storeDownSince, storeRecoveries, type StoreRecovery } from './outages.ts';
export { isLmdbCommitRejection, isStorageFailure, onStoreWriteFailure, storeWritesFailing } from './write-health.ts';
