// Verify client following interface-spec.md "Errors" (client handling column):
// - server_busy, module_unavailable, store_unavailable (503), request_in_progress (409), request_timeout (408: the
//   upload was too slow; nothing was charged and the key is not bound), inference_failed and
//   internal_error (500) are retried: Retry-After when the server gives it, else bounded
//   exponential backoff with full jitter; every retry sends the same Idempotency-Key and the
//   same body bytes, so a retry is never charged twice.
// - Everything else (400, 401, 403, 404, idempotency_conflict, 413, 415, 422, 429,
//   settlement_failed) is returned at once: looping cannot fix it, and settlement_failed must
//   not start a duplicate operation.
// - The outcome separates a verdict from an error by type, so a 401/403/429 can never be read
//   as "not live"; a verdict is status plus alive of each result, never HTTP 200 alone.

import { randomId } from './digest.ts';
import { encodeMultipart } from './multipart.ts';
import { parseRetryAfter, request, type ReadOutcome } from './request.ts';
import type {
  ModuleId, BatchEnvelope, CapturePacket, MeResponse, ModulesResponse, ResultRecord, SessionMeResponse, ValidationIssue, VerifyResponse,
} from './wire.ts';

export type Verdict = 'live' | 'not_live' | 'retry';

export interface CaptureVerdict {
  capture_id: string;
  verdict: Verdict;
  /** retry reason; null for live and not_live */
  reason: string | null;
}

interface OutcomeBase {
  /** the key every attempt carried; keep it to retry this verification later */
  idempotencyKey: string;
  /** HTTP attempts made, 1 when the first answer was final */
  attempts: number;
  /** X-Request-ID of the last answer, null when none came */
  requestId: string | null;
}

export interface VerifyCompleted extends OutcomeBase {
  kind: 'completed';
  /** `Idempotency-Replayed: true`: the saved result of an earlier call with this key */
  replayed: boolean;
  /** one per capture, in input order: the business decision */
  verdicts: CaptureVerdict[];
  response: VerifyResponse;
  /** the answer's body exactly as it came: its UTF-8 bytes are what `signature` signs. A device
   * forwards this text (never `response` serialised again: whitespace and key order are part
   * of what is signed) and `signature` to a backend that checks them against the service's
   * JWKS (the service's src/signing/README.md) */
  body: string;
  /** the `X-Verdict-Signature` header: a detached JWS (EdDSA) over the body's bytes; null when
   * the answer came without one (a proxy that dropped it) */
  signature: string | null;
}

export interface VerifyFailed extends OutcomeBase {
  kind: 'error';
  /** 0 when no HTTP answer came (network failure) */
  httpStatus: number;
  /** the service's error code; 'invalid_input' for 422, 'network_error', or 'invalid_response'
   * for an answer that is not the documented shape */
  code: string;
  message: string;
  /** the same package and key may be sent again later (retries ran out, not a final refusal) */
  retryable: boolean;
  /** the server's Retry-After in milliseconds, when it sent one */
  retryAfterMs: number | null;
  /** FastAPI-style items of a 422 */
  detail?: ValidationIssue[];
}

export type VerifyOutcome = VerifyCompleted | VerifyFailed;

export interface VerifyClientOptions {
  baseUrl: string;
  /** a business token (lvk_...), or on a device the session token (lvs_...) its backend minted
   * with createSession: that verifies with the session's module only, and reads session() */
  token: string;
  fetch?: typeof globalThis.fetch;
  /** total HTTP attempts including the first; default 4 */
  maxAttempts?: number;
  /** backoff base; default 500 ms */
  baseDelayMs?: number;
  /** backoff cap; default 10 000 ms */
  maxDelayMs?: number;
  /** a Retry-After longer than this ends the retries and is returned to the caller instead
   * of blocking it; default 60 000 ms */
  maxRetryAfterMs?: number;
  /** jitter source in [0, 1); default Math.random */
  random?: () => number;
  /** waits between attempts; default a timer (replace in tests) */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface VerifyCallOptions {
  /** default: a new UUID for this call; pass the key of an earlier call to resume it */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface VerifyClient {
  verify(moduleId: ModuleId, metadata: CapturePacket | BatchEnvelope | string,
    files: ReadonlyMap<string, Uint8Array>, options?: VerifyCallOptions): Promise<VerifyOutcome>;
  /** GET /v1/me: the token and its usage per granted module; never metered */
  me(options?: { signal?: AbortSignal }): Promise<ReadOutcome<MeResponse>>;
  /** GET /v1/modules: the granted modules and whether each is available now; never metered */
  modules(options?: { signal?: AbortSignal }): Promise<ReadOutcome<ModulesResponse>>;
  /** GET /v1/me with a session token: the session's module, captures left and expiry */
  session(options?: { signal?: AbortSignal }): Promise<ReadOutcome<SessionMeResponse>>;
}

const RETRIED_CODES = new Set(['server_busy', 'module_unavailable', 'store_unavailable', 'request_in_progress', 'request_timeout', 'inference_failed', 'internal_error']);
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/** Retry decision for one answer. A known code decides by itself; an answer without the
 * service's error body is a proxy speaking, and only its gateway statuses (502/503/504) say
 * the request may not have arrived, which the idempotency key makes safe to resend. */
export function isRetryable(status: number, code: string | null): boolean {
  if (code !== null) return RETRIED_CODES.has(code);
  return status === 502 || status === 503 || status === 504;
}

/** Full jitter: uniform in [0, min(cap, base * 2^(retry-1))]. `retry` counts from 1. */
export function backoffDelay(retry: number, baseDelayMs: number, maxDelayMs: number, random: () => number): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (retry - 1));
  return Math.floor(random() * ceiling);
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function createVerifyClient(options: VerifyClientOptions): VerifyClient {
  const doFetch = options.fetch ?? globalThis.fetch;
  const maxAttempts = Math.max(1, options.maxAttempts ?? 4);
  const baseDelayMs = options.baseDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? defaultSleep;
  const base = options.baseUrl.replace(/\/+$/, '');

  async function verify(moduleId: ModuleId, metadata: CapturePacket | BatchEnvelope | string,
    files: ReadonlyMap<string, Uint8Array>, call: VerifyCallOptions = {}): Promise<VerifyOutcome> {
    const key = call.idempotencyKey ?? randomId();
    if (!IDEMPOTENCY_KEY.test(key)) {
      throw new RangeError('Idempotency-Key must be 1 to 200 printable ASCII characters without spaces');
    }
    // Built once: every attempt sends these very bytes (same boundary included), which is what
    // "same key and package" means to the server's idempotency check.
    const { body: payload, contentType } = encodeMultipart(metadata, files);
    const url = `${base}/v1/modules/${encodeURIComponent(moduleId)}/verify`;
    const headers = {
      authorization: `Bearer ${options.token}`,
      'idempotency-key': key,
      'content-type': contentType,
      accept: 'application/json',
    };

    let last: VerifyFailed | undefined;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      let outcome: VerifyOutcome;
      try {
        const res = await doFetch(url, { method: 'POST', headers, body: payload, signal: call.signal });
        // the answer's body read here too: a connection cut while it arrives is a network error
        // like one cut before it, retried with the same key (the service replays a saved answer);
        // it threw out of verify(), which promises an outcome
        outcome = await readOutcome(res, key, attempt);
      } catch (err) {
        if (call.signal?.aborted) throw err;
        last = {
          kind: 'error', httpStatus: 0, code: 'network_error', message: (err as Error).message ?? String(err),
          retryable: true, retryAfterMs: null, idempotencyKey: key, attempts: attempt, requestId: null,
        };
        if (attempt < maxAttempts) await sleep(backoffDelay(attempt, baseDelayMs, maxDelayMs, random), call.signal);
        continue;
      }

      if (outcome.kind === 'completed') return outcome;
      last = outcome;
      if (!outcome.retryable || attempt === maxAttempts) break;
      if (outcome.retryAfterMs !== null && outcome.retryAfterMs > maxRetryAfterMs) break;
      await sleep(outcome.retryAfterMs ?? backoffDelay(attempt, baseDelayMs, maxDelayMs, random), call.signal);
    }
    return last!;
  }

  const read = <T>(path: string, signal: AbortSignal | undefined, valid: (json: unknown) => boolean) =>
    request<T>(options, 'GET', path, 200, undefined, signal, valid);

  return {
    verify,
    me: (o = {}) => read<MeResponse>('/v1/me', o.signal, (j) => Array.isArray((j as MeResponse | undefined)?.usage) && typeof (j as MeResponse).token === 'object'),
    modules: (o = {}) => read<ModulesResponse>('/v1/modules', o.signal, (j) => Array.isArray((j as ModulesResponse | undefined)?.modules)),
    session: (o = {}) => read<SessionMeResponse>('/v1/me', o.signal, (j) => typeof (j as SessionMeResponse | undefined)?.session?.session_id === 'string'),
  };
}

async function readOutcome(res: Response, key: string, attempts: number): Promise<VerifyOutcome> {
  const requestId = res.headers.get('x-request-id');
  // the bytes decoded as they are (text() would drop a leading byte-order mark): `body` must
  // encode back to exactly what was signed
  const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(await res.arrayBuffer());
  let json: unknown = undefined;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: a proxy page or a truncated answer; judged below by status alone
  }
  const common = { idempotencyKey: key, attempts, requestId };

  if (res.status === 200) {
    const verdicts = verdictsOf(json);
    if (verdicts === null) {
      return {
        kind: 'error', httpStatus: 200, code: 'invalid_response', message: 'HTTP 200 without a readable verification response',
        retryable: false, retryAfterMs: null, ...common,
      };
    }
    return {
      kind: 'completed', replayed: res.headers.get('idempotency-replayed') === 'true',
      verdicts, response: json as VerifyResponse, body: text, signature: res.headers.get('x-verdict-signature'), ...common,
    };
  }

  const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'));
  if (res.status === 422 && json !== null && typeof json === 'object' && Array.isArray((json as { detail?: unknown }).detail)) {
    return {
      kind: 'error', httpStatus: 422, code: 'invalid_input', message: 'The service rejected the input',
      detail: (json as { detail: ValidationIssue[] }).detail, retryable: false, retryAfterMs, ...common,
    };
  }
  const error = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const code = typeof error?.code === 'string' ? error.code : null;
  return {
    kind: 'error', httpStatus: res.status,
    code: code ?? `http_${res.status}`,
    message: typeof error?.message === 'string' ? error.message : `HTTP ${res.status}`,
    retryable: isRetryable(res.status, code), retryAfterMs, ...common,
  };
}

/** status plus alive, per result (spec "Decision rules" 4). Anything else in a 200 means the
 * answer is not what the service documents, and no verdict is derived from it. */
function verdictsOf(json: unknown): CaptureVerdict[] | null {
  const results = (json as { results?: unknown } | undefined)?.results;
  if (!Array.isArray(results)) return null;
  const verdicts: CaptureVerdict[] = [];
  for (const r of results as Partial<ResultRecord>[]) {
    if (r === null || typeof r !== 'object' || typeof r.capture_id !== 'string') return null;
    if (r.status === 'ok' && r.alive === true) verdicts.push({ capture_id: r.capture_id, verdict: 'live', reason: null });
    else if (r.status === 'ok' && r.alive === false) verdicts.push({ capture_id: r.capture_id, verdict: 'not_live', reason: null });
    else if (r.status === 'retry') verdicts.push({ capture_id: r.capture_id, verdict: 'retry', reason: r.reason ?? null });
    else return null;
  }
  return verdicts;
}
