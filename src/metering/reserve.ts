import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors/index.ts';
import type { ModuleId } from '../packets/types.ts';
import type { Store } from '../store/open.ts';
import type { TokenRecord } from '../store/records.ts';
import { appendLedger } from './ledger.ts';
import { secondsUntilReset, windowKey } from './periods.ts';
import type { IdempotencyRecord, Reservation } from './records.ts';
import { counterKey } from './usage.ts';

export interface ReserveInput {
  token: TokenRecord;
  moduleId: ModuleId;
  units: number;
  requestId: string;
  idempotencyKey: string | null;
  fingerprint: string | null;
  at: number;
  retryAfterSeconds: number;
}

export type ReserveOutcome =
  | { kind: 'reserved'; reservation: Reservation }
  | { kind: 'replay'; status: number; body: string };

type TxResult = ReserveOutcome | { kind: 'error'; error: ServiceError };

/** The idempotency lookup, the quota check and the reservation of the whole batch happen in
 * one LMDB write transaction. Writers are serialised across threads and processes, so two
 * requests racing for the last unit cannot both pass the check. Nothing is written unless
 * the request is admitted: a 409 or 429 leaves no trace but its audit line, and does not
 * bind the key (contract "Result details"). */
export async function reserve(store: Store, input: ReserveInput): Promise<ReserveOutcome> {
  const { token, moduleId, units, requestId, idempotencyKey: key, fingerprint, at } = input;
  const result = await store.db.reservations.transaction((): TxResult => {
    if (key !== null) {
      const rec = store.db.idempotency.get([token.id, key]) as IdempotencyRecord | undefined;
      if (rec) {
        if (rec.fingerprint !== fingerprint) return { kind: 'error', error: new ServiceError('idempotency_conflict') };
        if (rec.state === 'pending') {
          return { kind: 'error', error: new ServiceError('request_in_progress', undefined, { 'Retry-After': String(input.retryAfterSeconds) }) };
        }
        return { kind: 'replay', status: rec.status ?? 200, body: rec.body ?? '' };
      }
    }
    // The grant is read again inside the transaction: an operator may have changed it since
    // the request was authenticated.
    const fresh = store.db.tokens.get(token.id) as TokenRecord | undefined;
    const grant = fresh?.grants.find((g) => g.module_id === moduleId);
    if (!grant) return { kind: 'error', error: new ServiceError('module_forbidden') };
    if (grant.limit !== null) {
      const used = (store.db.counters.get(counterKey(token.id, moduleId, grant.period, at)) as number | undefined) ?? 0;
      if (used + units > grant.limit) {
        const wait = secondsUntilReset(grant.period, at);
        const available = Math.max(0, grant.limit - used);
        return {
          kind: 'error',
          error: new ServiceError(
            'quota_exceeded',
            `The ${grant.period === 'never' ? 'cumulative' : grant.period === 'day' ? 'daily' : 'monthly'} quota of ${moduleId} has ${available} unit(s) left; this request needs ${units}`,
            wait === null ? {} : { 'Retry-After': String(wait) },
          ),
        };
      }
    }
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
      pid: process.pid,
      idempotency_key: key,
      unsaved_body: null,
    };
    store.db.reservations.put(reservation.id, reservation);
    if (key !== null) {
      store.db.idempotency.put([token.id, key], {
        token_id: token.id,
        key,
        state: 'pending',
        fingerprint: fingerprint!,
        request_id: requestId,
        reservation_id: reservation.id,
        created_at: reservation.created_at,
        completed_at: null,
        status: null,
        body: null,
      } satisfies IdempotencyRecord);
    }
    return { kind: 'reserved', reservation };
  });
  if (result.kind === 'error') throw result.error;
  return result;
}
