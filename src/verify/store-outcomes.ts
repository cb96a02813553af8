import { messageOf, retryAfter, ServiceError, type VariantOf } from '../errors/index.ts';
import type { ReserveOutcome, SettleOutcome } from '../store/index.ts';

// The store says what became of a reservation or a settlement; what the client hears is
// decided here, once, for both stores.

/** A reservation the call goes on with: a new one, or the completed answer of its key. */
export type Admitted = Extract<ReserveOutcome, { kind: 'reserved' | 'replay' }>;

/** The catalogue error of a refused reservation; `retryAfterSeconds` is what a request still
 * in progress is told to wait (RETRY_AFTER_SECONDS). */
export function admittedOrThrow(outcome: ReserveOutcome, retryAfterSeconds: number): Admitted {
  switch (outcome.kind) {
    case 'reserved':
    case 'replay':
      return outcome;
    case 'quota_exceeded':
      // a cumulative quota never resets: no Retry-After
      throw new ServiceError('quota_exceeded', outcome.message, outcome.retryAfterSeconds === null ? {} : retryAfter(outcome.retryAfterSeconds));
    case 'request_in_progress':
      throw new ServiceError('request_in_progress', undefined, retryAfter(retryAfterSeconds));
    case 'session_captures_exceeded':
      throw new ServiceError('session_captures_exceeded', outcome.message);
    case 'idempotency_conflict':
    case 'settlement_failed':
    case 'invalid_token':
    case 'module_forbidden':
    case 'invalid_session_token':
      throw new ServiceError(outcome.kind);
  }
}

/** The answer's body of a settled call, or the catalogue error of one that was not. */
export function settledOrThrow(outcome: SettleOutcome): string {
  switch (outcome.kind) {
    case 'settled':
      return outcome.body;
    case 'refused':
      // never charged and its units are back: to the client, inference did not complete
      throw new SettlementRefusedError(outcome.refunded, outcome.cause);
    case 'settlement_failed':
      throw new ServiceError('settlement_failed', undefined, {}, outcome.cause);
    case 'not_recorded':
      throw new UnrecordedCallError(outcome.refund, outcome.cause);
    case 'outcome_unknown':
      throw new UnrecordedCallError(outcome.keyed ? 'settlement_pending' : 'settlement_unknown', outcome.cause);
  }
}

/** 500 inference_failed for a settlement the store refused (store.SettleOutcome 'refused'):
 * `refunded` says whether this call's refund gave its units back, so the metrics count them
 * where the ledger's refund entry was written, once. */
export class SettlementRefusedError extends ServiceError {
  constructor(readonly refunded: boolean, cause: unknown) {
    super('inference_failed', undefined, {}, cause);
  }
}

/** What became of a verify call whose write the store could not make (a full disk,
 * src/store/write-health.ts); the answer says exactly that (store_unavailable's variants in
 * the error catalogue). */
export type UnrecordedOutcome = VariantOf<'store_unavailable'>;

/** 503 store_unavailable, telling what was recorded; `outcome` also says whether the held
 * units are back already (the units metric counts them refunded). */
export class UnrecordedCallError extends ServiceError {
  constructor(readonly outcome: UnrecordedOutcome, cause: unknown) {
    super('store_unavailable', messageOf('store_unavailable', outcome), {}, cause);
  }
}
