import { ERRORS, errorBody, ServiceError, storeNotAnswering, ValidationFailure } from '../errors/index.ts';
import { StoreUnavailableError } from '../store/index.ts';
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
}

export function json(status: number, body: unknown, headers?: Record<string, string>): Reply {
  return { status, body, headers };
}

/** Maps any thrown value to a reply: declared errors keep their code, 422s carry `detail`,
 * a store that does not answer is server_busy (storeNotAnswering), anything else is
 * internal_error without leaking its message. */
export function errorReply(ctx: HttpContext, err: unknown): Reply {
  if (err instanceof StoreUnavailableError) err = storeNotAnswering(err);
  if (err instanceof ValidationFailure) {
    ctx.errorCode = 'invalid_input';
    return { status: 422, body: { detail: err.detail } };
  }
  if (err instanceof ServiceError) {
    ctx.errorCode = err.code;
    return { status: err.status, body: errorBody(err.code, err.message, ctx.requestId), headers: err.headers };
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
    write(ctx, reply, payload, type, (reply.close ?? false) || ctx.bodyAbandoned);
    return;
  }
  answerBeforeBodyEnd(ctx, reply, payload, type);
}

// An answer given before the request body has arrived (an early 4xx/5xx) must not be lost:
// closing a socket that still has unread data makes the kernel send a reset, which can
// discard the answer before the client reads it.
// - Declared length: answer at once without closing. uWS goes on parsing the declared rest
//   into a reader that drops it, and the connection is clean for the next request; a client
//   that stalls instead is closed by uWS's idle timeout.
// - Chunked (no announced end), or a declared length with `Connection: close`: drain first
//   and answer when the body ends, closing a
//   connection that then has nothing unread; a sender that goes on or stalls past the bound
//   gets the answer with the close, reset or not.
// - A declared rest beyond the bound is answered and closed at once.
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_CHUNKED_MAX_BYTES = 4 * 1024 * 1024;
const DRAIN_CHUNKED_MAX_MS = 5_000;
const CONNECTION_CLOSE = /(?:^|,)\s*close\s*(?:,|$)/i;

function answerBeforeBodyEnd(ctx: HttpContext, reply: Reply, payload: string | Buffer | Uint8Array, type: string | undefined): void {
  const declared = ctx.headers['content-length'];
  const remaining = declared !== undefined && /^\d{1,16}$/.test(declared) ? Number(declared) - ctx.bodyReceived : undefined;
  // A client that sent `Connection: close` has the connection closed after the answer (uWS
  // does so itself), so its unread rest would turn that close into a reset: it is drained
  // first, like a chunked body, within the same bounds as a declared rest.
  const closing = CONNECTION_CLOSE.test(ctx.headers['connection'] ?? '');
  if (remaining !== undefined && (!closing || remaining > DRAIN_MAX_BYTES)) {
    const drain = remaining <= DRAIN_MAX_BYTES && ctx.readBody(() => {});
    write(ctx, reply, payload, type, !drain || (reply.close ?? false));
    return;
  }
  if (!ctx.readBody(() => {})) {
    write(ctx, reply, payload, type, true);
    return;
  }
  const maxBytes = remaining === undefined ? DRAIN_CHUNKED_MAX_BYTES : DRAIN_MAX_BYTES;
  const startedAt = ctx.bodyReceived;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    write(ctx, reply, payload, type, true);
  };
  const timer = setTimeout(finish, DRAIN_CHUNKED_MAX_MS);
  ctx.readBody((_chunk, isLast) => {
    if (isLast || ctx.bodyReceived - startedAt > maxBytes) finish();
  });
  ctx.onAbort(() => {
    done = true;
    clearTimeout(timer);
  });
}

function write(ctx: HttpContext, reply: Reply, payload: string | Buffer | Uint8Array, type: string | undefined, close: boolean): void {
  if (ctx.aborted) return;
  ctx.res.cork(() => {
    ctx.res.writeStatus(statusLine(reply.status));
    ctx.res.writeHeader('X-Request-ID', ctx.requestId);
    if (type && reply.status !== 204) ctx.res.writeHeader('Content-Type', type);
    ctx.res.writeHeader('Cache-Control', 'no-store');
    if (ctx.responseHeaders) for (const [k, v] of Object.entries(ctx.responseHeaders)) ctx.res.writeHeader(k, v);
    if (reply.headers) for (const [k, v] of Object.entries(reply.headers)) ctx.res.writeHeader(k, v);
    if (reply.status === 204) ctx.res.endWithoutBody(0, close);
    else ctx.res.end(payload, close);
  });
}
