export { openStore, storeHealthy, SCHEMA_VERSION, StoreError, type Store } from './lmdb/open.ts';
export * from './records.ts';
export * from './lmdb/users.ts';
export * from './lmdb/tokens.ts';
export * from './lmdb/modules.ts';
export { newId } from './ids.ts';
export * from './backend.ts';
export * from './periods.ts';
export { quotaRefusal } from './quota.ts';
// The LMDB store's operations, for tests, benchmarks and the CLI that work on one LMDB store
// directly; everything else goes through StoreBackend.
export { appendLedger, listLedger, verifyLedger } from './lmdb/ledger.ts';
export { reserve } from './lmdb/reserve.ts';
export { settle, refund, resolveReservation, SettlementError } from './lmdb/settle.ts';
export { pruneIdempotency } from './lmdb/recovery.ts';
export { writeAudit, listAudit } from './lmdb/audit.ts';
export { dailyTotals, ensureDailyTotals } from './lmdb/daily-totals.ts';
export { ensureByTokenIndex } from './lmdb/by-token.ts';
export { counterKey, usedUnits, usageRecord, usageSnapshot } from './lmdb/usage.ts';
