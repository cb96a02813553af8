export { openStore, storeHealthy, SCHEMA_VERSION, StoreError, type Store } from './open.ts';
export * from './records.ts';
export * from './users.ts';
export * from './tokens.ts';
export * from './modules.ts';
export { newId } from './ids.ts';
export * from './backend.ts';
export * from './periods.ts';
export { quotaRefusal } from './quota.ts';
// The LMDB store's operations, for tests, benchmarks and the CLI that work on one LMDB store
// directly; everything else goes through StoreBackend.
export { appendLedger, listLedger, verifyLedger } from './ledger.ts';
export { reserve } from './reserve.ts';
export { settle, refund, resolveReservation, SettlementError } from './settle.ts';
export { pruneIdempotency } from './recovery.ts';
export { writeAudit, listAudit } from './audit.ts';
export { dailyTotals, ensureDailyTotals } from './daily-totals.ts';
export { ensureByTokenIndex } from './by-token.ts';
export { counterKey, usedUnits, usageRecord, usageSnapshot } from './usage.ts';
// The store a process of the service opens from its configuration (LMDB or PostgreSQL), as
// the server, its workers and the CLI do; tests open it the same way to make tokens in-process.
export { openConfiguredStore } from './select.ts';
