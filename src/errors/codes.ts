// Every error the service answers, declared once: HTTP status, code, default message.
// Codes and statuses are fixed by interface-spec.md ("Errors") and contract.md.
// Where one code answers cases a client or an operator tells apart (which limit made the
// service busy, what the store could not record), each case's message is declared here too,
// under `variants`: a throw site names its case (messageOf) and never writes the text, so
// every message the service can send is read in this one file.

import { BEARER_CHALLENGE, isBearerRefusal } from './challenge.ts';

const NO_CAPACITY_SLOT = 'No capacity slot available; retry after the indicated delay';
const NOTHING_RECORDED = 'The service cannot record calls right now (its store is failing writes): nothing was charged and the Idempotency-Key is not bound; retry with the same key after the indicated delay';

export const ERRORS = {
  invalid_idempotency_key: { status: 400, message: 'Idempotency-Key must be 1 to 200 printable ASCII characters without spaces' },
  invalid_content_length: { status: 400, message: 'Content-Length is malformed' },
  invalid_token: { status: 401, message: 'The business token is missing, invalid, expired, disabled or revoked' },
  invalid_credentials: { status: 401, message: 'Wrong username or password' },
  invalid_session: { status: 401, message: 'No valid administrator session' },
  invalid_session_token: { status: 401, message: 'The session token has expired or been revoked, or its business token is no longer valid; ask the backend for a new session' },
  module_forbidden: { status: 403, message: 'The token is not granted this module' },
  module_disabled: { status: 403, message: 'The operator has not enabled this module' },
  login_disabled: { status: 403, message: 'Login is disabled for this role' },
  invalid_current_password: { status: 403, message: 'The current password is wrong; nothing was changed' },
  forbidden: { status: 403, message: 'Administrator role required' },
  csrf_failed: { status: 403, message: 'Missing or wrong X-CSRF-Token' },
  session_not_allowed: {
    status: 403, message: 'A session token may only verify with its own module and read GET /v1/me; this call needs the business token',
    variants: { other_module: (moduleId: string) => `This session verifies with ${moduleId} only` },
  },
  module_not_found: {
    status: 404, message: 'Unknown module id',
    // the path's value, quoted and cut to 64 characters: a client's typo shows, a long one does not
    variants: { named: (moduleParam: string) => `Unknown module ${JSON.stringify(moduleParam.slice(0, 64))}` },
  },
  not_found: { status: 404, message: 'Not found' },
  session_not_found: { status: 404, message: 'No session with this id was minted by this token' },
  method_not_allowed: { status: 405, message: 'Method not allowed on this path' },
  request_in_progress: { status: 409, message: 'A request with this Idempotency-Key is still in progress' },
  idempotency_conflict: { status: 409, message: 'This Idempotency-Key was used with a different request' },
  request_timeout: { status: 408, message: 'The upload was too slow or did not finish in time; retry with the same key' },
  conflict: { status: 409, message: 'The resource already exists' },
  payload_too_large: { status: 413, message: 'The request body, a part or the batch is too large' },
  unsupported_media_type: {
    status: 415, message: 'The body must be multipart/form-data',
    // a multipart/form-data Content-Type whose boundary cannot be used (src/http/multipart/
    // content-type.ts): the client did send multipart/form-data, most often with a
    // Content-Type set by hand, which the spec warns against (review 3, F5)
    variants: {
      not_multipart: 'The body must be multipart/form-data',
      no_boundary: 'The multipart/form-data Content-Type has no boundary parameter, so its parts cannot be found; let the HTTP library generate the Content-Type, boundary included, from the form data (never set it by hand)',
      repeated_boundary: 'The multipart/form-data Content-Type has more than one boundary parameter; let the HTTP library generate the Content-Type, boundary included, from the form data (never set it by hand)',
      invalid_boundary: 'The boundary of the multipart/form-data Content-Type is invalid: RFC 2046 allows 1 to 70 characters of A-Z a-z 0-9 \'()+_,-./:=? and space, not ending in a space; let the HTTP library generate the Content-Type, boundary included, from the form data (never set it by hand)',
      unreadable_parameters: 'The parameters of the multipart/form-data Content-Type cannot be read (each is ; name=value, a quoted value closed); let the HTTP library generate the Content-Type, boundary included, from the form data (never set it by hand)',
    },
  },
  invalid_input: { status: 422, message: 'Invalid input' },
  quota_exceeded: { status: 429, message: 'The quota for this module is used up' },
  too_many_attempts: { status: 429, message: 'Too many failed attempts; try again later' },
  session_captures_exceeded: { status: 429, message: 'The request would pass the session\'s max_captures; nothing was charged' },
  session_rate_limited: { status: 429, message: 'This token minted too many sessions recently; retry after the indicated delay' },
  internal_error: { status: 500, message: 'Unexpected failure' },
  inference_failed: { status: 500, message: 'Inference failed; reserved quota was refunded' },
  settlement_failed: { status: 500, message: 'Settlement needs operator recovery; keep the key and contact the operator' },
  server_busy: {
    status: 503, message: NO_CAPACITY_SLOT,
    variants: {
      // verify admission (src/http/capacity.ts): the host, the client address or the token is at its share
      host: NO_CAPACITY_SLOT,
      address: 'Too many concurrent verify calls from this client address; retry after the indicated delay',
      token: 'Too many concurrent verify calls with this token; retry after the indicated delay',
      // the slot was taken back mid-upload for a caller below its fair share (src/http/verify-slot.ts)
      revoked: 'The verify slot went to a caller that held fewer: this token or client address holds more than its share of the host; retry after the indicated delay',
      // connections held for a request, per address and API worker (src/http/connections.ts)
      connections: 'Too many connections with a request in progress from this address; retry after the indicated delay',
      // the password hash queue (src/auth/hash-gate.ts)
      password_checks: 'Too many password checks in progress; retry after the indicated delay',
      // PostgreSQL refused, reset or timed out (storeNotAnswering)
      store_not_answering: 'The store is not answering; retry after the indicated delay',
    },
  },
  module_unavailable: {
    status: 503, message: 'The module is temporarily unavailable',
    variants: { models_loading: 'The module\'s models are not loaded yet' },
  },
  // 503 rather than 507 Insufficient Storage: the condition is the service's, temporary and
  // cleared without the client changing anything, and clients already retry a 503 with
  // Retry-After (server_busy); 507 is WebDAV's, which clients and proxies rarely handle.
  // The variants say what became of a verify call whose write the store could not make
  // (src/verify/store-outcomes.ts, UnrecordedCallError).
  store_unavailable: {
    status: 503, message: NOTHING_RECORDED,
    variants: {
      nothing_written: NOTHING_RECORDED,
      refunded: 'The store could not record this call\'s result: its units were given back and the Idempotency-Key released, so nothing was charged; retry with the same key after the indicated delay',
      refund_deferred: 'The store could not record this call\'s result: nothing is charged; the units held for it are given back as soon as the store can write again (until then a retry with this Idempotency-Key may answer request_in_progress); retry with the same key after the indicated delay',
      // the database does not answer (restarting, failing over to a standby): what the call held is
      // given back by the node once it answers again
      not_answering: 'The service\'s database is not answering (restarting or failing over): this call was not charged; retry with the same Idempotency-Key after the indicated delay (until the service has given back what the call held, a retry may answer request_in_progress)',
      settlement_pending: 'The database stopped answering while this call\'s charge was being recorded: the service completes it exactly once as soon as the database answers again; retry with the same Idempotency-Key after the indicated delay to get this call\'s answer (request_in_progress until then)',
      settlement_unknown: 'The database stopped answering while this call\'s charge was being recorded, and without an Idempotency-Key its answer cannot be kept: it is charged only if the charge had committed, else its units are given back; send an Idempotency-Key so a retry can get the answer',
    },
  },
} as const satisfies Record<string, { status: number; message: string; variants?: Record<string, string | ((...args: never[]) => string)> }>;

export type ErrorCode = keyof typeof ERRORS;

type VariantsOf<C extends ErrorCode> = (typeof ERRORS)[C] extends { variants: infer V } ? V : never;
/** The codes whose catalogue entry names cases of their own (`variants`). */
export type CodeWithVariants = { [C in ErrorCode]: (typeof ERRORS)[C] extends { variants: object } ? C : never }[ErrorCode];
/** The cases of `C`, by name. */
export type VariantOf<C extends CodeWithVariants> = keyof VariantsOf<C> & string;
type VariantArgs<V> = V extends (...args: infer A) => string ? A : [];

/** The catalogue's message for one case of `code`, filled with the values it names. */
export function messageOf<C extends CodeWithVariants, V extends VariantOf<C>>(code: C, variant: V, ...args: VariantArgs<VariantsOf<C>[V]>): string {
  const variants: Readonly<Record<string, unknown>> = ERRORS[code].variants;
  const text = variants[variant];
  return typeof text === 'function' ? (text as (...values: unknown[]) => string)(...args) : String(text);
}

/** A failure that maps to one of the declared codes. `headers` carries e.g. Retry-After. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;
  /** `cause` is for the log only; the client sees `message`. */
  constructor(code: ErrorCode, message?: string, headers: Record<string, string> = {}, cause?: unknown) {
    super(message ?? ERRORS[code].message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.status = ERRORS[code].status;
    // a refused Bearer token names its scheme wherever the error is answered (challenge.ts)
    this.headers = isBearerRefusal(code) ? { 'WWW-Authenticate': BEARER_CHALLENGE, ...headers } : headers;
  }
}

/** The error body of every answer but a 422's (interface-spec.md "Errors"). */
export function errorBody(code: ErrorCode | string, message: string, requestId: string): object {
  return { error: { code, message }, request_id: requestId };
}

/** 422 carrying FastAPI-style detail items instead of the error body. */
export class ValidationFailure extends Error {
  readonly status = 422;
  readonly detail: import('../contract/index.ts').ValidationIssue[];
  constructor(detail: import('../contract/index.ts').ValidationIssue[]) {
    super('invalid_input');
    this.detail = detail;
  }
}
