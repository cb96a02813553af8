import { atomically } from './atomic.ts';
import { FAILED_SETTLEMENTS_FLAG, LEDGER_HIGH, PENDING_INDEX_FLAG, readLatest, type Store } from './open.ts';

// The reservations that still hold units, indexed: `pendingReservations` (pending: a call in
// flight, or one whose process died) and `failedSettlements` (waiting for an operator). Each is
// written in the transaction that moves a reservation in or out of its state. Start-up recovery
// and a dead API worker's recovery read the pending ones from it, the operator's list the
// failed ones: the reservations themselves are kept as long as their idempotency keys, a day of
// traffic, and reading them all took 1.5 s per 531,000 (a start, and the main thread's turns
// while it relays inference when a worker died; bench/recover-start.ts).
//
// A build older than an index writes reservations without it (a roll-back, then this build
// again). Every reservation appends a ledger entry in its transaction, keyed [epoch ms, id], and
// this build keeps in `meta` the highest ledger key it wrote (LEDGER_HIGH, in the same
// transaction): a start that finds a higher key in the ledger (an O(log n) read) knows another
// build made calls here. It then reads every reservation once, as each start did before the
// indexes, and rebuilds both from what it finds (rebuildHeld). What another build does besides
// (refunds, resolutions, pruning) leaves at most entries whose reservation is no longer in that
// state, which every reader judges again.

/** A reservation made: pending. Inside its write. */
export function notePending(store: Store, id: string): void {
  // `void`: part of the caller's transaction, whose commit reports it
  void store.db.pendingReservations.put(id, 1);
}

/** A reservation no longer pending (settled, marked settlement_failed, refunded). Inside its write. */
export function clearPending(store: Store, id: string): void {
  void store.db.pendingReservations.remove(id);
}

/** A ledger entry appended with `key`: the highest such key this build wrote. Inside its write. */
export function noteLedgerKey(store: Store, key: LedgerKey): void {
  const high = ledgerHigh(store);
  if (high === undefined || compareLedgerKeys(key, high) > 0) void store.db.meta.put(LEDGER_HIGH, key);
}

type LedgerKey = [ms: number, id: string];

function compareLedgerKeys(a: LedgerKey, b: LedgerKey): number {
  return a[0] !== b[0] ? a[0] - b[0] : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

function ledgerHigh(store: Store): LedgerKey | undefined {
  const high = store.db.meta.get(LEDGER_HIGH);
  return Array.isArray(high) ? high : undefined;
}

/** The ledger's highest key, in the caller's transaction or snapshot. */
function lastLedgerKey(store: Store): LedgerKey | undefined {
  for (const key of store.db.ledger.getKeys({ reverse: true, limit: 1 })) return key as LedgerKey;
  return undefined;
}

/** Whether the indexes hold every reservation in their states: built, and no call made since
 * by another build. Reads the latest commit. */
export function heldIndexed(store: Store): boolean {
  readLatest(store);
  if (store.db.meta.get(PENDING_INDEX_FLAG) !== true || store.db.meta.get(FAILED_SETTLEMENTS_FLAG) !== true) return false;
  const high = ledgerHigh(store);
  const last = lastLedgerKey(store);
  return last === undefined ? high === undefined : high !== undefined && compareLedgerKeys(last, high) === 0;
}

/** Makes both indexes match `pending` and `failed`, what a read of every reservation found in
 * those states, each judged again inside the write; stray entries go; the ledger's highest key
 * is taken as this build's, and both indexes are marked built. */
export async function rebuildHeld(store: Store, pending: readonly string[], failed: readonly string[]): Promise<void> {
  await atomically(store, () => {
    const stateOf = (id: string) => store.db.reservations.get(id)?.state;
    const sync = (index: Store['db']['pendingReservations'], found: readonly string[], state: string) => {
      const set = new Set(found);
      // the keys read first: no removal under a live cursor
      for (const id of [...index.getKeys({})]) if (!set.has(id) && stateOf(id) !== state) void index.remove(id);
      for (const id of set) if (stateOf(id) === state) void index.put(id, 1);
    };
    sync(store.db.pendingReservations, pending, 'pending');
    sync(store.db.failedSettlements, failed, 'settlement_failed');
    const last = lastLedgerKey(store);
    void (last === undefined ? store.db.meta.remove(LEDGER_HIGH) : store.db.meta.put(LEDGER_HIGH, last));
    void store.db.meta.put(PENDING_INDEX_FLAG, true);
    void store.db.meta.put(FAILED_SETTLEMENTS_FLAG, true);
  });
}
