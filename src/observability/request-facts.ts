import type { WorkerMetrics } from './metrics.ts';

/** What a request log line adds beyond method, route and status: never a token, a cookie or
 * image bytes, only identifiers and counts. */
export interface RequestFacts {
  module?: string | null;
  token_id?: string | null;
  units?: number;
  outcome?: string;
  /** the call's trace id when tracing is on (src/observability/tracing.ts) */
  trace_id?: string;
}

// Kept beside the request rather than on it so that the HTTP context stays the router's; a
// WeakMap lets the facts go with the request.
const facts = new WeakMap<object, RequestFacts>();

export function requestFacts(ctx: object): RequestFacts | undefined {
  return facts.get(ctx);
}

/** What a verify call learnt by its end (the route's call state). */
export interface VerifyFacts {
  token: { id: string } | null;
  /** the device session the call was made with, if any */
  session: { id: string } | null;
  moduleId: string | null;
  /** the captures of the request, once validated */
  captures?: number;
  charged: number;
  reserved: number;
  refunded: number;
  results: readonly { mode: string; status: string; alive: boolean | null; score: number | null }[] | null;
}

function verdictOf(r: { status: string; alive: boolean | null }): string {
  return r.status === 'retry' ? 'retry' : r.alive ? 'live' : 'non_live';
}

/**
 * The one call a verify answer makes for observability: it records the verdicts, units and
 * rejections in the worker's metrics and leaves module, token id, units and outcome for the
 * request log line. `outcome` is the verdict when every capture agrees, `mixed` otherwise,
 * `replayed` for an idempotent replay, `error` when the answer is an error.
 */
export function recordVerify(ctx: object, metrics: WorkerMetrics, f: VerifyFacts, status: number, code: string | undefined, replayed: boolean, traceId?: string, sessionToken = false): void {
  const module = f.moduleId ?? 'unknown';
  // a call with a session token, authenticated or not (`sessionToken`: the caller sent one)
  if (f.session || sessionToken) metrics.sessionCalls.inc({ call: 'verify', status: String(status) });
  let outcome: string;
  if (replayed) outcome = 'replayed';
  else if (status !== 200 || !f.results) outcome = 'error';
  else {
    const seen = new Set<string>();
    for (const r of f.results) {
      const verdict = verdictOf(r);
      seen.add(verdict);
      metrics.verdicts.inc({ module, mode: r.mode, verdict });
      if (typeof r.score === 'number') metrics.scores.observe({ module, mode: r.mode }, r.score);
    }
    outcome = seen.size === 1 ? [...seen][0]! : 'mixed';
  }
  if (f.reserved > 0) metrics.units.inc({ module, kind: 'charged' }, f.reserved);
  if (f.refunded > 0) metrics.units.inc({ module, kind: 'refunded' }, f.refunded);
  if (code === 'quota_exceeded') metrics.quotaRejections.inc({ module });
  if (status >= 400 && code) metrics.verifyErrors.inc({ module, code });
  facts.set(ctx, { module: f.moduleId, token_id: f.token?.id ?? null, units: f.charged, outcome, ...(traceId === undefined ? {} : { trace_id: traceId }) });
}
