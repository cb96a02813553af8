import { messageOf, retryAfter, ServiceError, ValidationFailure } from '../errors/index.ts';
import { type Logger, type WorkerMetrics, requestFacts } from '../observability/index.ts';
import { StoreUnavailableError } from '../store/index.ts';
import { ClientGoneError } from '../verify/index.ts';
import { HttpContext } from './context.ts';
import type { ConnectionCap } from './connections.ts';
import type { Cors } from './cors.ts';
import { errorReply, send, type Reply } from './respond.ts';
import type { Router } from './router.ts';
import type { TemplatedApp, UwsModule } from './uws.ts';

export interface AppHandle {
  app: TemplatedApp;
  /** requests whose handler has not finished yet (drain waits for them) */
  inFlight(): number;
  onIdle(cb: () => void): void;
  /** from now on every answer closes its connection, so keep-alive clients move elsewhere */
  startDrain(): void;
}

/** One uWS app per API worker. Every request goes through one dispatcher so that every
 * answer, including 404/405 and crashes, carries X-Request-ID, the error body and a log line. */
/** Testing only (src/http/test-faults.ts, TEST_WORKER_FAULTS): runs before routing; returns a
 * reply to answer with instead of the route's, or nothing to route as usual. */
export type FaultHook = (ctx: HttpContext) => Reply | Promise<Reply> | undefined;

export interface AppOptions {
  cors?: Cors | null;
  /** headers on every answer the dispatcher gives (HSTS under TLS) */
  headers?: Record<string, string> | null;
  fault?: FaultHook | undefined;
  /** per-address cap on the connections held for a request (src/http/connections.ts) */
  connections?: ConnectionCap | null;
  /** RETRY_AFTER_SECONDS: the Retry-After of a 503 the dispatcher answers (a store that does not answer) */
  retryAfterSeconds: number;
}

export function createApp(uws: UwsModule, router: Router, log: Logger, metrics: WorkerMetrics, { cors = null, headers = null, fault, connections = null, retryAfterSeconds }: AppOptions): AppHandle {
  const app = uws.App();
  let inFlight = 0;
  let draining = false;
  const idleWaiters: (() => void)[] = [];

  // A handler's unexpected failure is logged with its request id and answered 500; declared
  // errors (4xx, 503...) are the handler's answer, not a failure. A store that does not answer
  // is answered 503 and logged as what it is, with the database's message.
  const failed = (ctx: HttpContext, err: unknown): Reply => {
    if (err instanceof StoreUnavailableError) log.warn({ request_id: ctx.requestId, err }, 'store not answering');
    else if (!(err instanceof ServiceError || err instanceof ValidationFailure || err instanceof ClientGoneError)) log.error({ request_id: ctx.requestId, err }, 'handler failed');
    return errorReply(ctx, err, retryAfterSeconds);
  };

  const finish = (ctx: HttpContext, reply: Reply) => {
    send(ctx, draining ? { ...reply, close: true } : reply);
    const seconds = (performance.now() - ctx.startedAt) / 1000;
    const status = ctx.aborted && ctx.status === 0 ? 499 : ctx.status || reply.status;
    metrics.observe(ctx.route, ctx.method, status, seconds);
    log.info(
      { request_id: ctx.requestId, method: ctx.method, route: ctx.route, status, code: ctx.errorCode, latency_ms: Math.round(seconds * 10000) / 10, ...requestFacts(ctx) },
      'request',
    );
  };

  const done = () => {
    inFlight--;
    if (inFlight === 0) for (const cb of idleWaiters.splice(0)) cb();
  };

  /** A liveness or readiness probe without a body is answered at once and holds nothing, so the
   * connection cap never refuses it: a balancer probing through a busy address (a proxy not in
   * TRUSTED_PROXIES) saw a node under load as down, and /health/ready's 503 was a server_busy
   * error where the contract fixes {status: "not_ready", modules}. One with a body is counted
   * like any request (its drain is what the cap bounds). */
  const isBodilessProbe = (ctx: HttpContext) => (ctx.method === 'GET' || ctx.method === 'HEAD') && !ctx.expectsBody && (ctx.path === '/health/live' || ctx.path === '/health/ready');

  app.any('/*', (res, req) => {
    const ctx = new HttpContext(res, req);
    inFlight++;
    let result: Reply | Promise<Reply>;
    try {
      const corsHeaders = cors?.headersFor(ctx) ?? null;
      ctx.responseHeaders = headers && corsHeaders ? { ...headers, ...corsHeaders } : (headers ?? corsHeaders);
      const preflight = cors?.preflight(ctx);
      if (connections && !isBodilessProbe(ctx) && !connections.admit(ctx)) {
        // Past its cap the address gets no drain either: draining is what it would hold.
        ctx.route = 'connection-cap';
        result = { ...failed(ctx, new ServiceError('server_busy', messageOf('server_busy', 'connections'), retryAfter(connections.retryAfterSeconds))), closeNow: true };
      } else if (preflight) {
        ctx.route = 'cors-preflight';
        result = preflight;
      } else {
        const match = router.match(ctx.method, ctx.path);
        ctx.route = match.pattern;
        result = fault?.(ctx) ?? match.handler(ctx, match.params);
      }
    } catch (err) {
      result = failed(ctx, err);
    }
    if (!(result instanceof Promise)) {
      try {
        finish(ctx, result);
      } catch (err) {
        log.error({ request_id: ctx.requestId, err }, 'answering failed');
      }
      ctx.inHandlerTick = false;
      done();
      return;
    }
    // The answer comes later: a body no handler claimed must be held now, while onData can
    // still be attached, so that the answer can drain it.
    ctx.holdUnclaimedBody();
    ctx.inHandlerTick = false;
    // finish itself failing (a reply it cannot serialise, a closed socket) must not leave a
    // rejection nobody handles: it is logged, and the request still counts as done.
    result
      .then(
        (reply) => finish(ctx, reply),
        (err) => finish(ctx, failed(ctx, err)),
      )
      .catch((err: unknown) => log.error({ request_id: ctx.requestId, err }, 'answering failed'))
      .finally(done);
  });

  return {
    app,
    inFlight: () => inFlight,
    startDrain() {
      draining = true;
    },
    onIdle(cb) {
      if (inFlight === 0) cb();
      else idleWaiters.push(cb);
    },
  };
}
