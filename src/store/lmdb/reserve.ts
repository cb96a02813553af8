import { randomBytes } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { meteringWrite } from './writer.ts';
import type { Store } from './open.ts';
import { isTokenLive } from '../token-rules.ts';
import { appendLedger } from './ledger.ts';
import { currentProcess } from '../owner.ts';
import { windowKey } from '../periods.ts';
import { quotaRefusal } from '../quota.ts';
import type { ReserveInput, ReserveOutcome } from '../backend.ts';
import type { Reservation } from '../records.ts';
import { bindKey, findKey } from './idempotency.ts';
import { counterKey } from './usage.ts';
import { bookSessionCall, sessionOf } from './device-sessions.ts';
import { notePending } from './held.ts';

/** The idempotency lookup, the quota check and the reservation of the whole batch happen in
 * one LMDB write transaction. Writers are serialised across threads and processes, so two
 * requests racing for the last unit cannot both pass the check. Nothing is written unless
 * the request is admitted: a 409 or 429 leaves no trace but its audit line, and does not
 * bind the key (contract "Result details"). */
export async function reserve(store: Store, input: ReserveInput): Promise<ReserveOutcome> {
  // `threadId`: the API worker asking, also when the process's metering writer commits it
  return meteringWrite(store, { op: 'reserve', input, thread: threadId }, () => reserveWrites(store, input, threadId), 'reserve');
}

/** The reservation's transaction body, run inside an open write transaction (atomically() on
 * the calling thread, or the metering writer's batch, writer-thread.ts). `thread` is the API
 * worker that asked for it: recovery of a dead worker finds its reservations by it. */
export function reserveWrites(store: Store, input: ReserveInput, thread: number): ReserveOutcome {
  return planReserve(store, input, thread)();
}

/** The reservation's checks, run now, which only read (a throw here has written nothing); then
 * its writes, returned to run once they passed: a request that is not admitted (a replay, a
 * conflict, a refusal) writes nothing. The metering writer runs the two apart
 * (writer-thread.ts runOne). */
export function planReserve(store: Store, input: ReserveInput, thread: number): () => ReserveOutcome {
  const refused = reserveChecks(store, input);
  return refused !== null ? () => refused : () => reserveApply(store, input, thread);
}

/** The outcome of a request that is not admitted, or null when it is. */
function reserveChecks(store: Store, input: ReserveInput): ReserveOutcome | null {
  const { token, moduleId, units, idempotencyKey: key, fingerprint, at } = input;
  // The token, its grant and the session are read again inside the transaction, before the
  // key: an upload can take a while, and an operator may have revoked, disabled or re-granted
  // the token, or revoked the session, meanwhile. A dead credential hears 401 on every call,
  // a replay included, as it does when the call starts (verify's accept step).
  const fresh = store.db.tokens.get(token.id);
  if (!fresh || !isTokenLive(fresh, at)) return { kind: 'invalid_token' };
  const grant = fresh.grants.find((g) => g.module_id === moduleId);
  if (!grant) return { kind: 'module_forbidden' };
  const session = sessionOf(store, input);
  if (session.dead) return { kind: 'invalid_session_token' };
  if (key !== null) {
    const rec = findKey(store, token.id, key);
    if (rec) {
      if (rec.fingerprint !== fingerprint) return { kind: 'idempotency_conflict' };
      if (rec.state === 'pending') {
        // A failed settlement is not in progress: polling would never end, so the retry
        // hears what the first call heard (keep the key, contact the operator).
        const held = store.db.reservations.get(rec.reservation_id);
        if (held?.state === 'settlement_failed') return { kind: 'settlement_failed' };
        return { kind: 'request_in_progress' };
      }
      return { kind: 'replay', status: rec.status ?? 200, body: rec.body ?? '' };
    }
  }
  // a used-up quota or session still replays (above): only an admission is counted
  const used = store.db.counters.get(counterKey(token.id, moduleId, grant.period, at)) ?? 0;
  const refusal = quotaRefusal(moduleId, grant, used, units, at);
  if (refusal) return refusal;
  return session.refusal(units);
}

/** The writes of an admitted reservation (reserveChecks passed in the same transaction). */
function reserveApply(store: Store, input: ReserveInput, thread: number): ReserveOutcome & { kind: 'reserved' } {
  const { token, moduleId, units, requestId, idempotencyKey: key, fingerprint, at } = input;
  const windows = { day: windowKey('day', at), month: windowKey('month', at) };
  appendLedger(store, { request_id: requestId, token_id: token.id, module_id: moduleId, units, kind: 'charge', at, windows });
  const reservation: Reservation = {
    id: `rsv_${randomBytes(9).toString('base64url')}`,
    request_id: requestId,
    token_id: token.id,
    module_id: moduleId,
    units,
    state: 'pending',
    windows,
    created_at: new Date(at).toISOString(),
    settled_at: null,
    ...currentProcess(),
    // the API worker, so that its replacement's recovery finds what it left (recovery.ts)
    thread,
    idempotency_key: key,
    unsaved_body: null,
  };
  // `void`: a write inside the transaction is part of it; atomically() reports its commit
  void store.db.reservations.put(reservation.id, reservation);
  notePending(store, reservation.id);
  bookSessionCall(store, input, reservation);
  // a request with a key always has its fingerprint (ReserveInput)
  if (key !== null) bindKey(store, reservation, fingerprint!);
  return { kind: 'reserved', reservation };
  // The metering writer answers this before its batch commits, and commits it with the next
  // write that must be synced (usually the call's own settlement), so it costs no sync of its
  // own, as the durability rule allows (writer-thread.ts, docs/metering.md "Commits and
  // durability"); on a thread without the writer it is committed and synced before the answer
}
