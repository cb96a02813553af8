import type { Key } from 'lmdb';
import { atomically } from './atomic.ts';
import { DAILY_TOTALS_FLAG as BUILT, type Store } from './open.ts';
import { dayTotals } from '../periods.ts';
import type { DailyTotal, LedgerEntry } from '../records.ts';

// Units per UTC day, kept beside the ledger so the console's usage chart is one short range
// read whatever the ledger's size (it used to sum up to 20,000 ledger entries in the browser).
// Keys of the `dailyTotals` db:
//   ['all', day, module_id]           -> [charged, refunded]  (every token)
//   ['tok', token_id, day, module_id] -> [charged, refunded]  (one token)
// A unit counts on the quota day of its reservation (the entry's `windows.day`), refunds
// included: a refund on a later day gives the units back to the day that took them, exactly
// as the day counters do, so the chart and the quota agree.
//
// Port note (store interface): addToDailyTotals runs with appendLedger in its transaction;
// dailyTotals is the query. In SQL: SELECT day, sum(...) FROM ledger GROUP BY day, or a
// rollup table updated in the same transaction.

type Totals = [charged: number, refunded: number];

function bump(store: Store, key: Key[], kind: LedgerEntry['kind'], units: number): void {
  const [c, r] = store.db.dailyTotals.get(key) ?? [0, 0];
  void store.db.dailyTotals.put(key, kind === 'charge' ? [c + units, r] : [c, r + units]);
}

/** Inside the ledger append's write transaction. */
export function addToDailyTotals(store: Store, e: Pick<LedgerEntry, 'token_id' | 'module_id' | 'units' | 'kind' | 'windows'>): void {
  bump(store, ['all', e.windows.day, e.module_id], e.kind, e.units);
  bump(store, ['tok', e.token_id, e.windows.day, e.module_id], e.kind, e.units);
}

/** Builds the totals from the whole ledger once per store (older stores have none). Flag and
 * totals change in one write transaction: entries appended meanwhile wait for it and then
 * add to complete totals. Clearing first drops what appends wrote before the build. */
export async function ensureDailyTotals(store: Store): Promise<void> {
  if (store.db.meta.get(BUILT) === true) return;
  await atomically(store, () => {
    if (store.db.meta.get(BUILT) === true) return;
    for (const key of [...store.db.dailyTotals.getKeys({})]) void store.db.dailyTotals.remove(key);
    for (const { value } of store.db.ledger.getRange({})) addToDailyTotals(store, value);
    void store.db.meta.put(BUILT, true);
  });
}

/** Every UTC day from `fromDay` to `toDay` (both inclusive, YYYY-MM-DD), zero days included,
 * for one token or all, one module or both. */
export async function dailyTotals(store: Store, q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }): Promise<DailyTotal[]> {
  await ensureDailyTotals(store);
  const sums = new Map<string, Totals>();
  const prefix = q.token_id === undefined ? ['all'] : ['tok', q.token_id];
  // the end key sorts after every module id of toDay
  for (const { key, value } of store.db.dailyTotals.getRange({ start: [...prefix, q.fromDay], end: [...prefix, q.toDay, '\uffff'] })) {
    const k = key as string[];
    const day = k[prefix.length]!;
    if (q.module_id !== undefined && k[prefix.length + 1] !== q.module_id) continue;
    const [c, r] = value;
    const s = sums.get(day) ?? [0, 0];
    sums.set(day, [s[0] + c, s[1] + r]);
  }
  return dayTotals(q.fromDay, q.toDay, sums);
}
