import { randomBytes } from 'node:crypto';
import type { Key } from 'lmdb';
import type { ModuleId } from '../../contract/index.ts';
import { readLatest, type Store } from './open.ts';
import { ledgerPrunedTotals } from './retention.ts';
import { byTokenReady, indexLedgerByToken } from './by-token.ts';
import { addToDailyTotals } from './daily-totals.ts';
import { noteLedgerKey } from './held.ts';
import { PERIODS } from '../periods.ts';
import type { LedgerCheck, Page, PageQuery } from '../backend.ts';
import type { LedgerEntry, LedgerKind, Period } from '../records.ts';

/** Appends a ledger entry and moves the three window counters by the same amount. Call only
 * inside a write transaction: the pair is what keeps counters equal to the ledger. */
export function appendLedger(
  store: Store,
  e: { request_id: string; token_id: string; module_id: ModuleId; units: number; kind: LedgerKind; at: number; windows: { day: string; month: string } },
): LedgerEntry {
  const entry: LedgerEntry = {
    id: `led_${randomBytes(9).toString('base64url')}`,
    request_id: e.request_id,
    token_id: e.token_id,
    module_id: e.module_id,
    units: e.units,
    kind: e.kind,
    at: new Date(e.at).toISOString(),
    windows: e.windows,
  };
  void store.db.ledger.put([e.at, entry.id], entry);
  noteLedgerKey(store, [e.at, entry.id]);
  indexLedgerByToken(store, entry, e.at);
  const delta = e.kind === 'charge' ? e.units : -e.units;
  for (const period of PERIODS) {
    const key = [e.token_id, e.module_id, period, windowOf(period, e.windows)];
    void store.db.counters.put(key, (store.db.counters.get(key) ?? 0) + delta);
  }
  addToDailyTotals(store, entry);
  return entry;
}

function windowOf(period: Period, w: { day: string; month: string }): string {
  return period === 'day' ? w.day : period === 'month' ? w.month : 'all';
}

/** The counter keys an entry moved and by how much (retention folds pruned entries with it). */
export function ledgerCounterDeltas(e: LedgerEntry): { key: [string, string, string, string]; delta: number }[] {
  const delta = e.kind === 'charge' ? e.units : -e.units;
  return PERIODS.map((period) => ({ key: [e.token_id, e.module_id, period, windowOf(period, e.windows)], delta }));
}

/** Time-ordered pages over a db keyed [epoch ms, id]; the cursor is the last key served.
 * `where` filters further (the audit's status and outcome). With `budget`, a call walks at
 * most that many rows: a selective filter then answers a short (even empty) page whose
 * next_cursor is the last row walked, so no call scans the whole log. */
export function pageByTime<T extends { token_id: string | null; module_id: string | null }>(
  store: Store,
  db: 'ledger' | 'audit',
  q: PageQuery,
  where?: (v: T) => boolean,
  budget = Infinity,
): Page<T> {
  const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
  const desc = q.order === 'desc';
  // [t] sorts before every [t, id]: as a lower bound it includes time t, as an upper bound
  // (reverse start, or end) it excludes it; so `from` is inclusive and `to` exclusive both ways
  const low: Key[] = [q.from ?? 0];
  const high: Key[] = [q.to ?? Number.MAX_SAFE_INTEGER];
  let start: Key[] = desc ? high : low;
  let exclusiveStart: string | undefined;
  if (q.cursor) {
    const key = JSON.parse(Buffer.from(q.cursor, 'base64url').toString('utf8')) as [number, string];
    // a cursor before the range (after it, walking back) starts at the range's bound: it
    // replaced that bound, and a cursor from another query read rows outside from/to (the
    // opposite bound is the range's end either way); PostgreSQL applies both bounds too
    const outside = desc ? q.to !== undefined && key[0] >= q.to : q.from !== undefined && key[0] < q.from;
    if (!outside) {
      start = key;
      exclusiveStart = JSON.stringify(key);
    }
  }
  // one token's rows come from its range of the byToken index (same [ms, id] keys)
  const indexed = q.token_id !== undefined && byTokenReady(store);
  const prefix: Key[] = indexed ? [db, q.token_id!] : [];
  const items: T[] = [];
  let last: unknown;
  let walked = 0;
  const rows = indexed ? tokenRows(store, db, [...prefix, ...start], [...prefix, ...(desc ? low : high)], desc) : store.db[db].getRange({ start, end: desc ? low : high, reverse: desc });
  for (const { key, value } of rows) {
    if (exclusiveStart !== undefined && JSON.stringify(key) === exclusiveStart) continue;
    if (walked++ === budget) return { items, next_cursor: Buffer.from(JSON.stringify(last)).toString('base64url') };
    last = items.length === limit ? last : key;
    const v = value as T;
    if (q.token_id && v.token_id !== q.token_id) continue;
    if (q.module_id && v.module_id !== q.module_id) continue;
    if (where && !where(v)) continue;
    if (items.length === limit) {
      return { items, next_cursor: Buffer.from(JSON.stringify(last)).toString('base64url') };
    }
    items.push(v);
    last = key;
  }
  return { items, next_cursor: null };
}

function* tokenRows(store: Store, db: 'ledger' | 'audit', start: Key[], end: Key[], reverse: boolean): Iterable<{ key: Key; value: unknown }> {
  for (const full of store.db.byToken.getKeys({ start, end, reverse })) {
    const key = (full as Key[]).slice(2);
    const value = store.db[db].get(key);
    if (value !== undefined) yield { key, value };
  }
}

export function listLedger(store: Store, q: PageQuery): Page<Omit<LedgerEntry, 'windows'>> {
  const page = pageByTime<LedgerEntry>(store, 'ledger', q);
  return { items: page.items.map(({ windows: _w, ...rest }) => rest), next_cursor: page.next_cursor };
}

/** Recomputes every counter from the ledger and compares (npm run cli -- ledger verify). The
 * three trees are read in one read transaction: a snapshot, consistent across them, that takes
 * nothing from writers. It used to be a write transaction, which holds LMDB's single writer for
 * the whole check: every reservation and settlement of a running service waited for it (6 s
 * on 1.5 million entries). */
export function verifyLedger(store: Store): LedgerCheck {
  // the latest commit, not the snapshot this thread last read
  readLatest(store);
  const transaction = store.root.useReadTransaction();
  try {
    const expected = new Map<string, number>();
    // entries removed by retention count through their per-window totals
    for (const { key, units } of ledgerPrunedTotals(store, transaction)) expected.set(JSON.stringify(key), units);
    let entries = 0;
    for (const { value } of store.db.ledger.getRange({ transaction })) {
      const e = value;
      entries++;
      const delta = e.kind === 'charge' ? e.units : -e.units;
      for (const period of PERIODS) {
        const k = JSON.stringify([e.token_id, e.module_id, period, windowOf(period, e.windows)]);
        expected.set(k, (expected.get(k) ?? 0) + delta);
      }
    }
    const mismatches: LedgerCheck['mismatches'] = [];
    let counters = 0;
    const seen = new Set<string>();
    for (const { key, value } of store.db.counters.getRange({ transaction })) {
      counters++;
      const k = JSON.stringify(key);
      seen.add(k);
      const want = expected.get(k) ?? 0;
      if (want !== value) mismatches.push({ key: key as unknown[], counter: value, ledger: want });
    }
    for (const [k, v] of expected) if (!seen.has(k) && v !== 0) mismatches.push({ key: JSON.parse(k), counter: 0, ledger: v });
    return { ok: mismatches.length === 0, entries, counters, mismatches };
  } finally {
    transaction.done();
  }
}
