import { ERRORS, errorBody, ServiceError, storeNotAnswering, ValidationFailure } from '../errors/index.ts';
import { StoreUnavailableError } from '../store/index.ts';
import { ClientGoneError } from '../verify/index.ts';
import type { HttpContext } from './context.ts';
import { statusLine } from './status.ts';

export interface Reply {
  status: number;
  /** objects are sent as JSON; strings and buffers as they are */
  body?: unknown;
  headers?: Record<string, string>;
  contentType?: string;
  /** close the connection after answering (used after an early error on a streamed body) */
  close?: boolean;
  /** answer at once and close, without draining a body still to come (an address past its
   * connection cap: src/http/connections.ts) */
  closeNow?: boolean;
}

export function json(status: number, body: unknown, headers?: Record<string, string>): Reply {
  return { status, body, headers };
}

/** Maps any thrown value to a reply: declared errors keep their code, 422s carry `detail`,
 * a store that does not answer is server_busy (storeNotAnswering, told to retry after
 * `retryAfterSeconds`: RETRY_AFTER_SECONDS), anything else is internal_error without leaking
 * its message. */
export function errorReply(ctx: HttpContext, err: unknown, retryAfterSeconds: number): Reply {
  if (err instanceof StoreUnavailableError) err = storeNotAnswering(err, retryAfterSeconds);
  if (err instanceof ValidationFailure) {
    ctx.errorCode = 'invalid_input';
    return { status: 422, body: { detail: err.detail } };
  }
  if (err instanceof ServiceError) {
    ctx.errorCode = err.code;
    return { status: err.status, body: errorBody(err.code, err.message, ctx.requestId), headers: err.headers };
  }
  // the client left while its body came (admin and login JSON): logged as that, answered to nobody
  if (err instanceof ClientGoneError) {
    ctx.errorCode = 'client_disconnected';
    return { status: 499 };
  }
  ctx.errorCode = 'internal_error';
  return { status: 500, body: errorBody('internal_error', ERRORS.internal_error.message, ctx.requestId) };
}

/** Writes a reply unless the client is gone. Safe to call from async code (it corks). */
export function send(ctx: HttpContext, reply: Reply): void {
  if (ctx.aborted || ctx.finished) return;
  ctx.finished = true;
  ctx.status = reply.status;
  let payload: string | Buffer | Uint8Array = '';
  let type = reply.contentType;
  if (reply.body !== undefined) {
    if (typeof reply.body === 'string' || reply.body instanceof Uint8Array) {
      payload = reply.body;
      type ??= 'text/plain; charset=utf-8';
    } else {
      payload = JSON.stringify(reply.body);
      type ??= 'application/json';
    }
  }
  if (!ctx.bodyUnread()) {
    write(ctx, reply, payload, type, (reply.close ?? false) || (reply.closeNow ?? false) || ctx.bodyAbandoned);
    return;
  }
  answerBeforeBodyEnd(ctx, reply, payload, type);
}

// An answer decided before the request body has arrived (an early 4xx/5xx) closes its
// connection, saying `Connection: close`, and goes out either at once or once the body has
// been drained (read and dropped). All of it is forced by uWebSockets.js:
// - An answer that ends while the body is still arriving, on a connection left open, is the
//   trap: when the body's last chunk then comes, uWS disarms the connection's idle timer (it
//   expects the handler to answer and re-arm it) and, the answer being over, nobody re-arms
//   it: the connection stays open for good, and its HttpResponse can no longer be touched,
//   not even to close it (uWS 20.30 and 20.57 alike; docs/security.md). So an early answer
//   always closes, and one that waits for the body ends after the last chunk.
// - Closing a socket that still has unread data makes the kernel send a reset, which can
//   discard the answer before the client reads it. So while the body keeps arriving fast (at
//   least DRAIN_MIN_BYTES in every TICK_MS) it is drained (read and dropped) and the answer goes
//   out when it ends: nothing unread, no reset. A client that sends nothing after its head (it
//   waits for the answer, or has no body to send), stalls or trickles is answered at the first
//   tick: nothing or little is in flight, and draining a trickle would keep it waiting for an
//   answer already decided.
// Bounds: a declared rest above 64 MiB is answered and closed at once, reset or not, and so is
// a 408 (the client was already too slow); otherwise the drain lasts at most DRAIN_MAX_MS (and
// 4 MiB for a chunked body): a client still sending then gets the answer with the close. So
// every client refused early learns it within about 5 s whatever its link. While it drains, the
// connection counts against its client's address (src/http/connections.ts).
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_CHUNKED_MAX_BYTES = 4 * 1024 * 1024;
const DRAIN_MAX_MS = 5_000;
const TICK_MS = 200;
const DRAIN_MIN_BYTES = 16 * 1024;

function answerBeforeBodyEnd(ctx: HttpContext, reply: Reply, payload: string | Buffer | Uint8Array, type: string | undefined): void {
  const declared = ctx.headers['content-length'];
  const remaining = declared !== undefined && /^\d{1,16}$/.test(declared) ? Number(declared) - ctx.bodyReceived : undefined;
  if (reply.closeNow || reply.status === 408 || (remaining !== undefined && remaining > DRAIN_MAX_BYTES) || !ctx.readBody(() => {})) {
    write(ctx, reply, payload, type, true);
    return;
  }
  const maxBytes = remaining === undefined ? DRAIN_CHUNKED_MAX_BYTES : DRAIN_MAX_BYTES;
  const startedAt = ctx.bodyReceived;
  let done = false;
  let tick: NodeJS.Timeout | null = null;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(bound);
    if (tick) clearTimeout(tick);
    write(ctx, reply, payload, type, true);
  };
  // Each tick ends with one more poll phase (setImmediate runs after it), so that bytes already
  // in the kernel's hands are counted even when this thread was too busy to read them in time.
  let counted = ctx.bodyReceived;
  const next = () => {
    tick = setTimeout(() => setImmediate(() => {
      if (done) return;
      const got = ctx.bodyReceived - counted;
      counted = ctx.bodyReceived;
      if (got < DRAIN_MIN_BYTES) finish();
      else next();
    }), TICK_MS);
  };
  const bound = setTimeout(finish, DRAIN_MAX_MS);
  // (a body held while the handler worked was replayed, into nothing, by the readBody above)
  ctx.readBody((_chunk, isLast) => {
    if (done) return;
    if (isLast || ctx.bodyReceived - startedAt > maxBytes) finish();
  });
  ctx.onAbort(() => {
    done = true;
    clearTimeout(bound);
    if (tick) clearTimeout(tick);
  });
  if (!done) next();
}

const CLIENT_CLOSES = /(?:^|,)\s*close\s*(?:,|$)/i;

/** Ends a HEAD answer: its length said, nothing sent. uWS 20.30's own way, endWithoutBody(n)
 * with n > 0, leaves the response waiting for n bytes (the connection's next request was never
 * answered), and an `undefined` length with a close aborts the process; so the header is written
 * here and the response ended without a length of uWS's. A HEAD answer that closes its
 * connection says length 0 instead: nothing can follow it to be misread. */
function endHead(ctx: HttpContext, length: number, close: boolean): void {
  if (close) {
    ctx.res.endWithoutBody(0, true);
    return;
  }
  ctx.res.writeHeader('Content-Length', String(length));
  ctx.res.endWithoutBody();
}

function write(ctx: HttpContext, reply: Reply, payload: string | Buffer | Uint8Array, type: string | undefined, close: boolean): void {
  if (ctx.aborted) return;
  ctx.res.cork(() => {
    ctx.res.writeStatus(statusLine(reply.status));
    ctx.res.writeHeader('X-Request-ID', ctx.requestId);
    if (type && reply.status !== 204) ctx.res.writeHeader('Content-Type', type);
    ctx.res.writeHeader('Cache-Control', 'no-store');
    // uWS closes after answering a request that said `Connection: close` and, the client having
    // said it, does not echo it; RFC 9112 (9.6) asks the server to, so it is written here (uWS
    // writes its own only when the client did not say close: never twice)
    if (CLIENT_CLOSES.test(ctx.headers['connection'] ?? '')) ctx.res.writeHeader('Connection', 'close');
    if (ctx.responseHeaders) for (const [k, v] of Object.entries(ctx.responseHeaders)) ctx.res.writeHeader(k, v);
    if (reply.headers) for (const [k, v] of Object.entries(reply.headers)) ctx.res.writeHeader(k, v);
    if (reply.status === 204) ctx.res.endWithoutBody(0, close);
    // HEAD (routed to GET's handler): the GET answer's headers and length, no content (RFC
    // 9110 9.3.2); its body written anyway was read by a keep-alive client as the next answer
    else if (ctx.method === 'HEAD') endHead(ctx, typeof payload === 'string' ? Buffer.byteLength(payload) : payload.byteLength, close);
    else ctx.res.end(payload, close);
  });
  ctx.settle();
}
