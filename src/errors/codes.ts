// Every error the service answers, declared once: HTTP status, code, default message.
// Codes and statuses are fixed by interface-spec.md ("Errors") and contract.md.

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
  session_not_allowed: { status: 403, message: 'A session token may only verify with its own module and read GET /v1/me; this call needs the business token' },
  module_not_found: { status: 404, message: 'Unknown module id' },
  not_found: { status: 404, message: 'Not found' },
  session_not_found: { status: 404, message: 'No session with this id was minted by this token' },
  method_not_allowed: { status: 405, message: 'Method not allowed on this path' },
  request_in_progress: { status: 409, message: 'A request with this Idempotency-Key is still in progress' },
  idempotency_conflict: { status: 409, message: 'This Idempotency-Key was used with a different request' },
  request_timeout: { status: 408, message: 'The upload was too slow or did not finish in time; retry with the same key' },
  conflict: { status: 409, message: 'The resource already exists' },
  payload_too_large: { status: 413, message: 'The request body, a part or the batch is too large' },
  unsupported_media_type: { status: 415, message: 'The body must be multipart/form-data' },
  invalid_input: { status: 422, message: 'Invalid input' },
  quota_exceeded: { status: 429, message: 'The quota for this module is used up' },
  too_many_attempts: { status: 429, message: 'Too many failed attempts; try again later' },
  session_captures_exceeded: { status: 429, message: 'The request would pass the session\'s max_captures; nothing was charged' },
  session_rate_limited: { status: 429, message: 'This token minted too many sessions recently; retry after the indicated delay' },
  internal_error: { status: 500, message: 'Unexpected failure' },
  inference_failed: { status: 500, message: 'Inference failed; reserved quota was refunded' },
  settlement_failed: { status: 500, message: 'Settlement needs operator recovery; keep the key and contact the operator' },
  server_busy: { status: 503, message: 'No capacity slot available; retry after the indicated delay' },
  module_unavailable: { status: 503, message: 'The module is temporarily unavailable' },
  // 503 rather than 507 Insufficient Storage: the condition is the service's, temporary and
  // cleared without the client changing anything, and clients already retry a 503 with
  // Retry-After (server_busy); 507 is WebDAV's, which clients and proxies rarely handle.
  store_unavailable: { status: 503, message: 'The service cannot record calls right now (its store is failing writes): nothing was charged and the Idempotency-Key is not bound; retry with the same key after the indicated delay' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

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
    this.headers = headers;
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
