import { ERRORS, errorBody, retryAfter, ServiceError, storeNotAnswering, ValidationFailure, type ErrorCode } from '../errors/index.ts';
import { StoreUnavailableError } from '../store/index.ts';
import { UnrecordedCallError } from './store-outcomes.ts';
import { ClientGoneError, type VerifyAnswer, type VerifyStep } from './ports.ts';

/** An answer that is not a refusal from the error catalogue. */
export type Answered = 'verdict' | 'replayed' | 'client_disconnected';

/**
 * Every answer a verify call can get, by the step that first gives it, in the contract's
 * order (interface-spec.md "Errors"; the step list in verify.ts). A refusal is the step's
 * ServiceError or ValidationFailure (`invalid_input`), rendered by `refusal` below; a code not
 * listed under its step is a new answer the contract must say something about (the in-process
 * rule tests hold every answer they see to this list).
 */
export const ANSWERS = {
  // server_busy at a step that reads or writes the store: PostgreSQL is not answering
  // (the store's StoreUnavailableError, rendered by storeNotAnswering in src/errors)
  accept: ['invalid_token', 'invalid_session_token', 'module_not_found', 'session_not_allowed', 'module_forbidden', 'module_disabled', 'module_unavailable', 'store_unavailable', 'server_busy'],
  admit: ['server_busy'],
  // the slot can be revoked while the body arrives (server_busy); the metadata is checked the
  // moment its part ends, so a bad one fails the upload itself (413, 422)
  receive: ['invalid_idempotency_key', 'invalid_content_length', 'payload_too_large', 'unsupported_media_type', 'request_timeout', 'server_busy', 'invalid_input', 'client_disconnected'],
  validate: ['invalid_input', 'payload_too_large'],
  // the token and grant are read again inside the reservation (changed mid-upload)
  reserve: ['replayed', 'idempotency_conflict', 'request_in_progress', 'settlement_failed', 'invalid_token', 'invalid_session_token', 'module_forbidden', 'quota_exceeded', 'session_captures_exceeded', 'store_unavailable', 'server_busy'],
  // inference_failed with the units refunded, or store_unavailable when the refund is owed
  infer: ['inference_failed', 'store_unavailable', 'server_busy'],
  // inference_failed: PostgreSQL refused the settlement (the node's lease lapsed), units back
  settle: ['verdict', 'inference_failed', 'settlement_failed', 'store_unavailable', 'server_busy'],
  // whatever no step declared: logged, and answered without its message
  any: ['internal_error'],
} as const satisfies Record<Exclude<VerifyStep, 'respond'> | 'admit' | 'any', readonly (ErrorCode | Answered)[]>;

export function verdict(body: string): VerifyAnswer {
  return { status: 200, body, contentType: 'application/json' };
}

/** The answer the key's first call got, stored with it. */
export function replayed(status: number, body: string): VerifyAnswer {
  return { status, body, contentType: 'application/json', headers: { 'Idempotency-Replayed': 'true' } };
}

/** A step's failure as its answer. A write the store could not make is retried like a busy
 * server: its Retry-After is set on the error itself, so the log line shows what the client got. */
export function refusal(err: unknown, requestId: string, retryAfterSeconds: number): VerifyAnswer {
  if (err instanceof StoreUnavailableError) err = storeNotAnswering(err, retryAfterSeconds);
  if (err instanceof ClientGoneError) return { status: 499, errorCode: 'client_disconnected' };
  if (err instanceof ValidationFailure) return { status: 422, body: { detail: err.detail }, errorCode: 'invalid_input' };
  if (err instanceof ServiceError) {
    if (err instanceof UnrecordedCallError) err.headers['Retry-After'] ??= retryAfter(retryAfterSeconds)['Retry-After'];
    return { status: err.status, body: errorBody(err.code, err.message, requestId), headers: err.headers, errorCode: err.code };
  }
  return { status: 500, body: errorBody('internal_error', ERRORS.internal_error.message, requestId), errorCode: 'internal_error' };
}

/** A failure the operator should see: anything undeclared, and a declared one with a cause
 * (a store that could not write). A refusal of the client's own doing is only audited. */
export function worthLogging(err: unknown): boolean {
  if (err instanceof ClientGoneError) return false;
  if (err instanceof ServiceError) return err.cause !== undefined;
  return !(err instanceof ValidationFailure);
}
