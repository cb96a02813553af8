// Cross-origin access for browser capture clients (issue 14): CORS_ORIGINS lists the exact
// origins allowed to call /v1. Only /v1 takes part: /admin and /auth run on a session cookie
// with CSRF protection and stay same-origin, so a listed origin never gets a preflight or an
// Access-Control-Allow-Origin there. The business token travels in Authorization, not in a
// cookie, so no credentials mode is allowed.

import type { HttpContext } from './context.ts';
import type { Reply } from './respond.ts';

/** What a capture client sends beyond the CORS-safelisted headers; a browser app that traces
 * its calls sends the W3C trace context (traceparent, tracestate), which a verify call
 * continues (docs/observability.md). */
const ALLOW_HEADERS = 'Authorization, Idempotency-Key, Content-Type, traceparent, tracestate';
/** What a capture client must read: the request id for support, the replay flag, the wait
 * before a retry, the verdict signature, and the trace context of the server span (a verify
 * answer carries it while the service traces) that a browser app files its own spans under. */
const EXPOSE_HEADERS = 'X-Request-ID, Idempotency-Replayed, Retry-After, X-Verdict-Signature, traceparent, tracestate';
const ALLOW_METHODS = 'GET, POST';
const MAX_AGE_SECONDS = '600';

export interface Cors {
  /** The answer to a CORS preflight this service takes part in, or null to route as usual. */
  preflight(ctx: HttpContext): Reply | null;
  /** Headers every answer to this request carries (empty when CORS does not apply). */
  headersFor(ctx: HttpContext): Record<string, string> | null;
}

const isApiPath = (path: string) => path === '/v1' || path.startsWith('/v1/');

export function createCors(origins: readonly string[]): Cors | null {
  if (origins.length === 0) return null;
  const allowed = new Set(origins);
  return {
    preflight(ctx) {
      if (ctx.method !== 'OPTIONS' || !isApiPath(ctx.path)) return null;
      const origin = ctx.headers.origin;
      // a listed origin asking for a real preflight; anything else is routed as before (405)
      if (origin === undefined || !allowed.has(origin) || ctx.headers['access-control-request-method'] === undefined) return null;
      return {
        status: 204,
        headers: {
          'Access-Control-Allow-Methods': ALLOW_METHODS,
          'Access-Control-Allow-Headers': ALLOW_HEADERS,
          'Access-Control-Max-Age': MAX_AGE_SECONDS,
        },
      };
    },
    headersFor(ctx): Record<string, string> | null {
      if (!isApiPath(ctx.path)) return null;
      const origin = ctx.headers.origin;
      // Vary on every /v1 answer, so a shared cache never hands one origin's answer to another
      if (origin === undefined || !allowed.has(origin)) return { Vary: 'Origin' };
      return { 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSE_HEADERS, Vary: 'Origin' };
    },
  };
}
