import type { Config } from '../config/index.ts';
import { addressKey } from './capacity.ts';
import { clientAddress } from './client-address.ts';
import type { HttpContext } from './context.ts';

/** Per client address, the connections this API worker is holding for a request: from the
 * moment its head arrives until its answer has been written (or the client left). That
 * includes a request whose answer was decided before its body arrived and which is now
 * draining that body (src/http/respond.ts): the one state in which a client could otherwise
 * keep the service holding a connection at its own pace.
 *
 * Why only those: uWebSockets.js has no per-connection hook (no accept, no close event for
 * HTTP), and once an answer has ended its HttpResponse can no longer be touched, not even to
 * close it. What the service can still hold is the request in progress; everything else is
 * under uWS's own timers: a connection that has not sent a complete head, and an idle
 * keep-alive connection after a complete answer, are closed by uWS (about 10 s on 20.30,
 * about 30 s on 20.57). Early answers (decided before the body arrived) close their
 * connection after the body, with `Connection: close`, so they never become idle keep-alive
 * connections that uWS forgets to time out (docs/security.md).
 *
 * "Address" is the client address by the audit's rule (src/http/client-address.ts): the peer,
 * or behind a proxy listed in TRUSTED_PROXIES the nearest untrusted X-Forwarded-For hop; an
 * IPv6 address counts by its /64, like the verify slots. Behind a proxy that is not trusted,
 * every client is the proxy's address and shares one cap: configure TRUSTED_PROXIES, or raise
 * the cap.
 *
 * The count is per API worker (the kernel spreads one client's connections over the workers
 * by a hash of their ports), so the host holds at most WORKERS x cap per address. */
export class ConnectionCap {
  private readonly held = new Map<string, number>();

  constructor(private readonly config: Pick<Config, 'TRUSTED_PROXIES' | 'CONNECTIONS_PER_ADDRESS' | 'RETRY_AFTER_SECONDS'>) {}

  /** Counts the request's connection against its client's address until the request settles
   * (answered or gone). False when the address already holds its cap on this worker: the
   * caller answers 503 and closes the connection at once. */
  admit(ctx: HttpContext): boolean {
    const key = addressKey(clientAddress(this.config, ctx.peerAddress, ctx.headers['x-forwarded-for']));
    const n = this.held.get(key) ?? 0;
    if (n >= this.config.CONNECTIONS_PER_ADDRESS) return false;
    this.held.set(key, n + 1);
    ctx.onSettled(() => {
      const left = (this.held.get(key) ?? 1) - 1;
      if (left === 0) this.held.delete(key);
      else this.held.set(key, left);
    });
    return true;
  }

  /** The refusal's Retry-After: the refused client retries once one of its requests is over. */
  get retryAfterSeconds(): number {
    return this.config.RETRY_AFTER_SECONDS;
  }
}
