// One read or session call (GET /v1/me, /v1/modules, the session calls): the body when the
// status is the one expected and the body has the expected shape, else the service's error as a
// verify outcome carries it. Not retried: the caller knows when to repeat a read, and a session
// mint that failed on the network may have been made.

/** Answer of a read call (me, modules): the body, or the error as in a verify outcome. Read
 * calls are not retried: they are cheap to repeat and the caller knows when it needs them. */
export type ReadOutcome<T> =
  | { kind: 'ok'; value: T; requestId: string | null }
  | { kind: 'error'; httpStatus: number; code: string; message: string; retryAfterMs: number | null; requestId: string | null };

/** Retry-After as delta-seconds or HTTP-date, in milliseconds; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const date = Date.parse(v);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** Where a call goes and with which token. */
export interface RequestTarget {
  baseUrl: string;
  token: string;
  fetch?: typeof globalThis.fetch;
}

export async function request<T>(o: RequestTarget, method: string, path: string, ok: number, body: unknown, signal: AbortSignal | undefined, valid: (json: unknown) => boolean): Promise<ReadOutcome<T>> {
  const doFetch = o.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = { authorization: `Bearer ${o.token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  let text: string;
  try {
    res = await doFetch(`${o.baseUrl.replace(/\/+$/, '')}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    // the body read too: a connection cut while the answer arrives is a network error like one
    // cut before it (it threw out of the call, which promises an outcome)
    text = await res.text();
  } catch (err) {
    if (signal?.aborted) throw err;
    return { kind: 'error', httpStatus: 0, code: 'network_error', message: (err as Error).message ?? String(err), retryAfterMs: null, requestId: null };
  }
  const requestId = res.headers.get('x-request-id');
  let json: unknown;
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (res.status === ok && valid(json)) return { kind: 'ok', value: json as T, requestId };
  const error = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return {
    kind: 'error', httpStatus: res.status,
    code: res.status === ok ? 'invalid_response' : res.status === 422 ? 'invalid_input' : typeof error?.code === 'string' ? error.code : `http_${res.status}`,
    message: typeof error?.message === 'string' ? error.message : `HTTP ${res.status}`,
    retryAfterMs: parseRetryAfter(res.headers.get('retry-after')), requestId,
  };
}
