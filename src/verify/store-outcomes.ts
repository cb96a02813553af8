import { retryAfter, ServiceError } from '../errors/index.ts';
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
      throw new ServiceError('inference_failed', undefined, {}, outcome.cause);
    case 'settlement_failed':
      throw new ServiceError('settlement_failed', undefined, {}, outcome.cause);
    case 'not_recorded':
      throw new UnrecordedCallError(outcome.refund, outcome.cause);
    case 'outcome_unknown':
      throw new UnrecordedCallError(outcome.keyed ? 'settlement_pending' : 'settlement_unknown', outcome.cause);
  }
}

/** What became of a verify call whose write the store could not make (a full disk,
 * src/store/write-health.ts); the answer says exactly that. */
export type UnrecordedOutcome = 'nothing_written' | 'refunded' | 'refund_deferred' | 'not_answering' | 'settlement_pending' | 'settlement_unknown';

const MESSAGES: Record<UnrecordedOutcome, string> = {
  nothing_written: 'The service cannot record calls right now (its store is failing writes): nothing was charged and the Idempotency-Key is not bound; retry with the same key after the indicated delay',
  refunded: 'The store could not record this call\'s result: its units were given back and the Idempotency-Key released, so nothing was charged; retry with the same key after the indicated delay',
  refund_deferred: 'The store could not record this call\'s result: nothing is charged; the units held for it are given back as soon as the store can write again (until then a retry with this Idempotency-Key may answer request_in_progress); retry with the same key after the indicated delay',
  // the database does not answer (restarting, failing over to a standby): what the call held is
  // given back by the node once it answers again
  not_answering: 'The service\'s database is not answering (restarting or failing over): this call was not charged; retry with the same Idempotency-Key after the indicated delay (until the service has given back what the call held, a retry may answer request_in_progress)',
  settlement_pending: 'The database stopped answering while this call\'s charge was being recorded: the service completes it exactly once as soon as the database answers again; retry with the same Idempotency-Key after the indicated delay to get this call\'s answer (request_in_progress until then)',
  settlement_unknown: 'The database stopped answering while this call\'s charge was being recorded, and without an Idempotency-Key its answer cannot be kept: it is charged only if the charge had committed, else its units are given back; send an Idempotency-Key so a retry can get the answer',
};

/** 503 store_unavailable, telling what was recorded; `outcome` also says whether the held
 * units are back already (the units metric counts them refunded). */
export class UnrecordedCallError extends ServiceError {
  constructor(readonly outcome: UnrecordedOutcome, cause: unknown) {
    super('store_unavailable', MESSAGES[outcome], {}, cause);
  }
}
