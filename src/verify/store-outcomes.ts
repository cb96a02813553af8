import { retryAfter, ServiceError } from '../errors/index.ts';
import type { ReserveOutcome, SettleOutcome } from '../store/backend.ts';
import { UnrecordedCallError } from '../store/write-health.ts';

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
    case 'idempotency_conflict':
    case 'settlement_failed':
    case 'invalid_token':
    case 'module_forbidden':
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
  }
}
