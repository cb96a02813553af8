import { atomically } from './atomic.ts';
import { meteringWrite } from './writer.ts';
import { RESERVATION_LOST, WRITER_LOST, type SettleFault } from './writer-client.ts';
import { FAILED_SETTLEMENTS_FLAG, readLatest, type Store } from './open.ts';
import { clearPending, rebuildHeld } from './held.ts';
import { scanChunks } from './prune-scan.ts';
import { appendLedger } from './ledger.ts';
import type { RenderAnswer, Reservation, UsageRecord } from '../records.ts';
import { completeKey, releaseKey, resolveKey } from './idempotency.ts';
import { usageSnapshot } from './usage.ts';
import { windowKey } from '../periods.ts';
import { remainingUnits } from '../quota.ts';
import { isStorageFailure } from '../write-health.ts';
import type { SettleOutcome } from '../backend.ts';
import { releaseSessionCall } from './device-sessions.ts';
import { noteExpiry } from './expiry.ts';
import { holdForever } from '../faults.ts';
import { keptResults } from '../kept-answer.ts';

/** Internal to the settlement: its transaction refused (the reservation no longer pending, or
 * the test fault); caught below and turned into a settlement outcome, never answered as is.
 * Thrown by planSettle's checks, which only read: the metering writer runs a request's checks
 * apart from its writes, without a child transaction, and has nothing to undo
 * (writer-thread.ts runOne). */
export class SettlementError extends Error {
  override name = 'SettlementError';
}

// `void` on a write inside atomically(): the write is part of the transaction, whose commit
// atomically() reports; the write's own promise settles with that commit.

/** Charges a reservation and saves the answer in one transaction: the reservation becomes
 * charged, the idempotency record completed with the exact body (replayed byte for byte),
 * and the small result JSON is stored. `render` builds the body from a usage snapshot, so the
 * response shows usage as of settlement: taken inside the transaction when this thread
 * commits it, or just before it when the process's metering writer does (writer.ts: a
 * closure cannot travel to that thread; the settlement changes no counter, so the two differ
 * only by other calls' reservations committed in between). */
export async function settle(
  store: Store,
  reservation: Reservation,
  at: number,
  render: RenderAnswer,
  results: unknown,
  fault: SettleFault = null,
): Promise<SettleOutcome> {
  let body: string | undefined;
  // the answer as posted to the metering writer, if it was
  let posted: string | undefined;
  try {
    body = await meteringWrite(
      store,
      () => ({ op: 'settle', reservation, at, body: (posted = renderNow(store, reservation, at, render)), results, fault }),
      () => settleWrites(store, reservation, at, render, results, fault),
      'settle',
    );
  } catch (err) {
    // The metering writer answered the reservation before its commit, and that commit failed
    // (writer-thread.ts): nothing of the call is stored, its key is not bound, nothing to give
    // back. To the client as to the metrics, the units held are back: 503 store_unavailable.
    if (err instanceof Error && err.name === RESERVATION_LOST) return { kind: 'not_recorded', refund: 'refunded', cause: err };
    // The store could not write the settlement (a full disk): the transaction left nothing, so
    // the call was not charged and nothing needs an operator; the units go back.
    if (isStorageFailure(err)) return giveBack(store, reservation, at, err);
    // The metering writer ended with the settlement in flight (writer-client.ts): its thread
    // is gone, so it commits nothing more and what it committed is synced. A settlement it
    // committed is answered as one, not as settlement_failed with the call charged.
    if (posted !== undefined && err instanceof Error && err.name === WRITER_LOST && chargedAt(store, reservation.id, at)) return { kind: 'settled', body: posted };
    // Nor is a reservation the writer answered before its commit and never committed (it ended
    // first): nothing of the call is stored, as above. Every answer of the writer but an early
    // reservation's leaves after its commit, so a reservation absent once the writer has
    // answered this settlement, or is gone, was never committed. Not before: an error raised
    // here before the settlement was posted (its answer could not be rendered) may find the
    // reservation still in the writer's open batch, which commits it.
    if ((posted !== undefined || store.writer?.alive !== true) && getReservation(store, reservation.id) === undefined) return { kind: 'not_recorded', refund: 'refunded', cause: err };
    // The units stay reserved and the key pending: an operator decides (spec: settlement
    // fails -> pending may remain, operator recovery needed). The answer that could not be
    // saved is kept on the reservation so a "charge" resolution can complete the key.
    const text = safeRender(store, reservation, at, render);
    const marked = await meteringWrite(store, { op: 'mark', id: reservation.id, body: text }, () => markFailedWrites(store, reservation.id, text), 'settle').then(
      () => null,
      (markErr: unknown) => markErr,
    );
    // settlement_failed only when it is recorded: an operator sees it in the settlements list.
    // A mark that could not be written leaves a pending reservation nobody would resolve, so
    // its units go back instead, and the answer says so.
    if (marked !== null) return giveBack(store, reservation, at, new AggregateError([err, marked], 'settlement failed, and marking it settlement_failed failed too'));
    return { kind: 'settlement_failed', cause: err };
  }
  return { kind: 'settled', body };
}

/** Whether the latest commit holds reservation `id` charged by the settlement at `at`. */
function chargedAt(store: Store, id: string, at: number): boolean {
  readLatest(store);
  const r = store.db.reservations.get(id);
  return r?.state === 'charged' && r.settled_at === new Date(at).toISOString();
}

/** The answer from the latest committed usage, for a settlement the metering writer commits.
 * The writer answers a reservation before its commit (writer-thread.ts), so a fast call may
 * settle while its own reservation is not committed yet: its units are then counted here, as
 * the commit will count them (the settlement changes no counter). */
function renderNow(store: Store, r: Reservation, at: number, render: RenderAnswer): string {
  readLatest(store);
  const usage = usageSnapshot(store, store.db.tokens.get(r.token_id)!, at);
  return render(store.db.reservations.get(r.id) === undefined ? withOwnUnits(usage, r, at) : usage);
}

/** `usage` with reservation `r`'s units counted in each window of its module that holds them. */
function withOwnUnits(usage: UsageRecord[], r: Reservation, at: number): UsageRecord[] {
  return usage.map((u) => {
    if (u.module_id !== r.module_id || (u.period !== 'never' && r.windows[u.period] !== windowKey(u.period, at))) return u;
    const used = u.used + r.units;
    return { ...u, used, remaining: remainingUnits(u.limit, used) };
  });
}

/** The settlement's transaction body (this thread's atomically(), or the metering writer's
 * batch with `render` the answer already rendered). */
export function settleWrites(store: Store, reservation: Reservation, at: number, render: RenderAnswer | string, results: unknown, fault: SettleFault): string {
  return planSettle(store, reservation, at, render, results, fault)();
}

/** The settlement's checks, run now, which only read (the reservation still pending, the answer
 * to save; a throw here has written nothing); then its writes, returned to run once they
 * passed. The metering writer runs the two apart (writer-thread.ts runOne). */
export function planSettle(store: Store, reservation: Reservation, at: number, render: RenderAnswer | string, results: unknown, fault: SettleFault): () => string {
  const current = store.db.reservations.get(reservation.id);
  if (!current || current.state !== 'pending') throw new SettlementError(`reservation ${reservation.id} is ${current?.state ?? 'missing'}`);
  const text = typeof render === 'string' ? render : render(usageSnapshot(store, store.db.tokens.get(reservation.token_id)!, at));
  if (fault === 'fail') throw new SettlementError('injected settlement failure (TEST_SETTLEMENT_FAIL_PREFIX)');
  return () => {
    const iso = new Date(at).toISOString();
    void store.db.reservations.put(reservation.id, { ...current, state: 'charged', settled_at: iso });
    clearPending(store, reservation.id);
    noteExpiry(store, 'reservations', iso, reservation.id);
    completeKey(store, reservation, iso, text);
    void store.db.results.put(reservation.request_id, { at: iso, token_id: reservation.token_id, module_id: reservation.module_id, results });
    noteExpiry(store, 'results', iso, reservation.request_id);
    // after the writes, as a commit's failure comes: none of them may be committed
    if (fault === 'fail-commit') throw failedCommit();
    if (fault === 'hold') holdForever('lmdb settlement transaction');
    return text;
  };
}

/** The test's failing commit (SettleFault 'fail-commit'): an ENOSPC error, thrown after the
 * settlement's writes, that makes the metering writer's whole batch fail (writer-thread.ts
 * runOne: a throw in a request's writes fails the batch), as a commit that cannot be written
 * does; on the calling thread it fails the transaction the same way. */
function failedCommit(): Error {
  return Object.assign(new Error('injected commit failure: No space left on device'), { code: 'ENOSPC' });
}

/** A settlement that failed otherwise than for the disk: the reservation waits for an
 * operator, with the answer that could not be saved. */
export function markFailedWrites(store: Store, id: string, text: string | null): void {
  planMark(store, id, text)();
}

/** The mark's check, run now (the reservation still pending), and its write, returned. */
export function planMark(store: Store, id: string, text: string | null): () => void {
  const current = store.db.reservations.get(id);
  if (!current || current.state !== 'pending') return () => {};
  return () => {
    void store.db.reservations.put(id, { ...current, state: 'settlement_failed', unsaved_body: text });
    clearPending(store, id);
    void store.db.failedSettlements.put(id, 1);
  };
}

/** A settlement that could not be written: refund now, or (the store still failing) once
 * writes work again (store.writes runs the repair before it reports writes back); until then
 * the reservation is pending and its key answers request_in_progress. Either way the outcome
 * says which. */
async function giveBack(store: Store, reservation: Reservation, at: number, cause: unknown): Promise<SettleOutcome> {
  try {
    await refund(store, reservation.id, at);
  } catch (refundErr) {
    store.writes.deferRepair(`refund:${reservation.id}`, () => refund(store, reservation.id, Date.now()));
    return { kind: 'not_recorded', refund: 'refund_deferred', cause: new AggregateError([cause, refundErr], 'settlement not written, refund deferred') };
  }
  return { kind: 'not_recorded', refund: 'refunded', cause };
}

function safeRender(store: Store, r: Reservation, at: number, render: RenderAnswer): string | null {
  try {
    const token = store.db.tokens.get(r.token_id)!;
    return render(usageSnapshot(store, token, at));
  } catch {
    return null;
  }
}

/** Gives reserved units back (inference failure, crash recovery, operator refund) and
 * releases the idempotency key so the same key may be retried. Idempotent. */
export async function refund(store: Store, reservationId: string, at: number): Promise<Reservation | undefined> {
  return meteringWrite(store, { op: 'refund', id: reservationId, at }, () => refundWrites(store, reservationId, at), 'refund').catch((err: unknown) => {
    // a reservation the metering writer answered before a commit that failed: nothing is
    // held, nothing to give back (writer-thread.ts)
    if (err instanceof Error && err.name === RESERVATION_LOST) return undefined;
    throw err;
  });
}

/** The refund's transaction body. */
export function refundWrites(store: Store, reservationId: string, at: number): Reservation | undefined {
  return planRefund(store, reservationId, at)();
}

/** The refund's check, run now (the reservation still holds units), and its writes, returned:
 * a reservation that holds none is answered as it is. */
export function planRefund(store: Store, reservationId: string, at: number): () => Reservation | undefined {
  const r = store.db.reservations.get(reservationId);
  if (!r || (r.state !== 'pending' && r.state !== 'settlement_failed')) return () => r;
  return () => refundHeld(store, r, at);
}

/** The writes of a refund; the caller's transaction has checked that `r` is still held. */
export function refundHeld(store: Store, r: Reservation, at: number): Reservation {
  appendLedger(store, { request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, kind: 'refund', at, windows: r.windows });
  const next: Reservation = { ...r, state: 'refunded', settled_at: new Date(at).toISOString(), unsaved_body: null };
  void store.db.reservations.put(r.id, next);
  noteExpiry(store, 'reservations', next.settled_at!, r.id);
  if (r.state === 'settlement_failed') void store.db.failedSettlements.remove(r.id);
  else clearPending(store, r.id);
  releaseSessionCall(store, r.id);
  releaseKey(store, r);
  return next;
}

/** Operator resolution of a settlement_failed reservation. "charge" keeps the units and, when
 * the answer was kept, completes the idempotency key with it so the client's retry replays
 * it, and stores its results as the settlement would have (a device session's backend reads
 * its verdict there); without a kept answer the key is released. "refund" gives the units
 * back. */
export async function resolveReservation(store: Store, id: string, action: 'charge' | 'refund', at: number): Promise<Reservation | undefined | 'not_pending'> {
  // Checked inside the write: two operators may resolve the same record at once, and only the
  // first resolution may take effect. Only what the operator list shows is resolvable: a
  // pending reservation may still be in flight, and start-up recovery settles those whose
  // process is gone.
  return atomically(store, () => {
    const r = store.db.reservations.get(id);
    if (!r) return undefined;
    if (r.state !== 'settlement_failed') return 'not_pending' as const;
    if (action === 'refund') return refundHeld(store, r, at);
    const iso = new Date(at).toISOString();
    const next: Reservation = { ...r, state: 'charged', settled_at: iso, unsaved_body: null };
    void store.db.reservations.put(id, next);
    noteExpiry(store, 'reservations', iso, id);
    void store.db.failedSettlements.remove(id);
    resolveKey(store, r, iso);
    // the results the failed settlement could not store, as it would have stored them
    const results = keptResults(r.unsaved_body);
    if (results !== undefined) {
      void store.db.results.put(r.request_id, { at: iso, token_id: r.token_id, module_id: r.module_id, results });
      noteExpiry(store, 'results', iso, r.request_id);
    }
    return next;
  });
}

export function getReservation(store: Store, id: string): Reservation | undefined {
  readLatest(store);
  return store.db.reservations.get(id);
}

/** What the operator's settlements list and the console's overview show: the reservations
 * waiting for a decision, found through their index (`failedSettlements`, written in the same
 * transaction as each change of state in or out of settlement_failed). The reservations are
 * kept as long as their idempotency keys, and reading them all took an API worker 1.2 s in one
 * block for 531,000 of them; the failed ones are few. */
export async function listSettlementFailed(store: Store): Promise<Reservation[]> {
  await ensureFailedSettlementsIndex(store);
  readLatest(store);
  const out: Reservation[] = [];
  for (const id of store.db.failedSettlements.getKeys({})) {
    const r = store.db.reservations.get(id);
    if (r?.state === 'settlement_failed') out.push(r);
  }
  return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Builds the indexes for a store an older build wrote (a service start builds them with
 * recovery's read, recovery.ts): the same rebuild as at such a start, on a read in chunks
 * (prune-scan.ts). For a CLI run on such a store. */
export async function ensureFailedSettlementsIndex(store: Store): Promise<void> {
  // the flag only: an API worker lists, and calls another build has made since are start-up
  // recovery's to find (held.ts)
  readLatest(store);
  if (store.db.meta.get(FAILED_SETTLEMENTS_FLAG) === true) return;
  const pending: string[] = [];
  const failed: string[] = [];
  for await (const { key, value } of scanChunks(store.db.reservations)) {
    if (value.state === 'pending') pending.push(key as string);
    if (value.state === 'settlement_failed') failed.push(key as string);
  }
  await rebuildHeld(store, pending, failed);
}
