import { readLatest, type Store } from './open.ts';
import type { Grant, Period, TokenRecord, UsageRecord } from '../records.ts';
import type { ModuleId } from '../../contract/index.ts';
import { resetAt, windowKey } from '../periods.ts';
import { remainingUnits } from '../quota.ts';

export function counterKey(tokenId: string, moduleId: ModuleId, period: Period, at: number): [string, string, string, string] {
  return [tokenId, moduleId, period, windowKey(period, at)];
}

export function usedUnits(store: Store, tokenId: string, moduleId: ModuleId, period: Period, at: number): number {
  return store.db.counters.get(counterKey(tokenId, moduleId, period, at)) ?? 0;
}

export function usageRecord(store: Store, tokenId: string, grant: Grant, at: number): UsageRecord {
  const used = usedUnits(store, tokenId, grant.module_id, grant.period, at);
  const reset = resetAt(grant.period, at);
  return {
    module_id: grant.module_id,
    limit: grant.limit,
    period: grant.period,
    used,
    remaining: remainingUnits(grant.limit, used),
    reset_at: reset === null ? null : new Date(reset).toISOString(),
  };
}

/** Snapshot of every granted module of a token, in module order. */
export function usageSnapshot(store: Store, token: TokenRecord, at: number): UsageRecord[] {
  // inside a write transaction (settlement) reads go through that transaction anyway
  readLatest(store);
  return token.grants.map((g) => usageRecord(store, token.id, g, at));
}
