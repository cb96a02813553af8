import { timingSafeEqual } from 'node:crypto';
import { ServiceError } from '../../errors/index.ts';
import { allowListAddress } from '../client-address.ts';
import type { HttpContext } from '../context.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

function isLoopback(addr: string): boolean {
  return addr.startsWith('127.') || addr === '::1' || addr === '0000:0000:0000:0000:0000:0000:0000:0001' || addr.startsWith('::ffff:127.');
}

/** Loopback by the same client-address rule as the audit line: behind a trusted reverse proxy
 * on this host the socket peer is always loopback, so the peer alone would open the metrics
 * to every outside client; the forwarded address is what must be local. */
function fromLoopback(ctx: HttpContext, s: Services): boolean {
  // null: a forwarded address that is not an address (src/http/client-address.ts)
  const address = allowListAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']);
  return address !== null && isLoopback(address);
}

function bearerMatches(ctx: HttpContext, expected: string): boolean {
  const m = /^Bearer (.+)$/i.exec(ctx.headers['authorization'] ?? '');
  if (!m) return false;
  const a = Buffer.from(m[1]!);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** /metrics: open to loopback scrapers; from elsewhere only with METRICS_TOKEN. Strangers get
 * the 404 of a path that does not exist, not a 401 that asks for credentials; the endpoint is
 * no secret all the same (/openapi.json lists it, a POST answers 405 Allow: GET). */
export function metricsRoutes(router: Router, s: Services): void {
  router.add('GET', '/metrics', async (ctx) => {
    const token = s.config.METRICS_TOKEN;
    const allowed = (token !== undefined && bearerMatches(ctx, token)) || fromLoopback(ctx, s);
    if (!allowed) throw new ServiceError('not_found', `No route for ${ctx.path}`);
    const { text, contentType } = await s.collectMetrics();
    return { status: 200, body: text, contentType };
  });
}
