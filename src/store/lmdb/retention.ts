import type { Key, Transaction } from 'lmdb';
import { BY_TOKEN_PRUNED_FLAG, LEDGER_HIGH, type Store } from './open.ts';
import { heldIndexed } from './held.ts';
import type { TimeDb } from './by-token.ts';
import { atomically } from './atomic.ts';
import { REMOVE_BATCH } from './prune-scan.ts';
import { pruneExpired } from './expiry.ts';

// Store-level retention operations on LMDB: each removes records older than a cutoff in
// bounded batches, one write transaction per batch, so a large first prune never holds the
// single LMDB writer lock long enough to stall a verify call's reservation. Trees keyed by time
// (audit, ledger) are read as a key range; the others through their expiry index (expiry.ts).
// The PostgreSQL store does the same as set-based statements (src/store/pg/retention.ts).

const BATCH = REMOVE_BATCH;

/** Audit rows are keyed [epoch ms, request id]: a key range. Each row's entry in the per-token
 * index (by-token.ts) goes with it, in the same transaction: the index kept every call's two
 * entries for ever, so retention did not bound the store, and a token's pages walked the dead
 * entries. */
export async function pruneAuditBefore(store: Store, cutoff: number): Promise<number> {
  await dropOrphanedByToken(store);
  let removed = 0;
  for (;;) {
    const rows = [...store.db.audit.getRange({ start: [0], end: [cutoff], limit: BATCH })];
    if (rows.length === 0) return removed;
    await atomically(store, () => {
      for (const { key, value } of rows) {
        void store.db.audit.remove(key);
        if (value.token_id !== null) void store.db.byToken.remove(['audit', value.token_id, ...(key as [number, string])]);
      }
    });
    removed += rows.length;
  }
}

/** The per-token index entries whose row is gone: what a store pruned before its index was
 * pruned with the rows kept. Removed once per store (a full read of the index, in batches),
 * then flagged. */
async function dropOrphanedByToken(store: Store): Promise<void> {
  if (store.db.meta.get(BY_TOKEN_PRUNED_FLAG) === true) return;
  let start: Key | undefined;
  for (;;) {
    const batch = [...store.db.byToken.getKeys({ ...(start === undefined ? {} : { start }), limit: BATCH })];
    if (start !== undefined && batch.length > 0 && JSON.stringify(batch[0]) === JSON.stringify(start)) batch.shift();
    if (batch.length === 0) break;
    const gone = batch.filter((k) => {
      const [db, , ms, id] = k as [TimeDb, string, number, string];
      return (db === 'audit' ? store.db.audit : store.db.ledger).get([ms, id]) === undefined;
    });
    if (gone.length > 0) await atomically(store, () => {
      for (const k of gone) void store.db.byToken.remove(k);
    });
    start = batch[batch.length - 1];
  }
  await atomically(store, () => void store.db.meta.put(BY_TOKEN_PRUNED_FLAG, true));
}

/** Result JSON is keyed by request id with its time inside: found through the expiry index
 * (expiry.ts), removed in batches. */
export function pruneResultsBefore(store: Store, cutoff: number): Promise<number> {
  return pruneExpired(store, 'results', store.db.results, cutoff);
}

type CounterKey = [token_id: string, module_id: string, period: string, window: string];

/** Folds a removed ledger entry's units into the per-window totals of pruned entries. */
function addPruned(store: Store, key: CounterKey, delta: number): void {
  void store.db.ledgerPruned.put(key, (store.db.ledgerPruned.get(key) ?? 0) + delta);
}

/**
 * Ledger entries older than the cutoff go, and in the same transaction their units are added
 * to `ledgerPruned`, keyed like the usage counters ([token, module, period, window]). The
 * counters never change, so usage is untouched, and `ledger verify` checks
 * counters = pruned totals + remaining entries.
 */
export async function pruneLedgerBefore(
  store: Store,
  cutoff: number,
  keysOf: (entry: any) => { key: CounterKey; delta: number }[],
): Promise<number> {
  await dropOrphanedByToken(store);
  // The held indexes are known complete while the ledger's last key is the one this build noted
  // (held.ts LEDGER_HIGH). A prune that empties the ledger takes that key too: the mark goes
  // with it when it was right, or the next start read every reservation again, as after
  // another build's writes, and forgot the expiry index (so the next prunes read whole trees).
  const indexed = heldIndexed(store);
  let removed = 0;
  for (;;) {
    const n = await atomically(store, () => {
      // read the batch first, then write: no removal under a live cursor
      const batch = [...store.db.ledger.getRange({ start: [0], end: [cutoff], limit: BATCH })];
      for (const { key, value } of batch) {
        for (const { key: k, delta } of keysOf(value)) addPruned(store, k, delta);
        void store.db.ledger.remove(key);
        void store.db.byToken.remove(['ledger', value.token_id, ...(key as [number, string])]);
      }
      if (indexed && batch.length > 0 && [...store.db.ledger.getKeys({ limit: 1 })].length === 0) void store.db.meta.remove(LEDGER_HIGH);
      return batch.length;
    });
    removed += n;
    if (n === 0) return removed;
  }
}

/** The pruned entries' totals per counter key, for `ledger verify` (read in its snapshot). */
export function ledgerPrunedTotals(store: Store, transaction?: Transaction): Iterable<{ key: CounterKey; units: number }> {
  return store.db.ledgerPruned.getRange({ transaction }).map(({ key, value }) => ({ key: key as CounterKey, units: value }));
}
