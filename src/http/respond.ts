import { ERRORS, ServiceError, ValidationFailure, type ErrorCode } from '../errors/index.ts';
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

export function errorBody(code: ErrorCode | string, message: string, requestId: string): object {
  return { error: { code, message }, request_id: requestId };
}

/** Maps any thrown value to a reply: declared errors keep their code, 422s carry `detail`,
 * anything else is internal_error without leaking its message. */
export function errorReply(ctx: HttpContext, err: unknown): Reply {
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

function expectsUnreadBody(ctx: HttpContext): boolean {
  if (ctx.bodyRead) return false;
  const len = ctx.headers['content-length'];
  return (len !== undefined && len !== '0') || ctx.headers['transfer-encoding'] !== undefined;
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
  ctx.res.cork(() => {
    ctx.res.writeStatus(statusLine(reply.status));
    ctx.res.writeHeader('X-Request-ID', ctx.requestId);
    if (type && reply.status !== 204) ctx.res.writeHeader('Content-Type', type);
    ctx.res.writeHeader('Cache-Control', 'no-store');
    if (reply.headers) for (const [k, v] of Object.entries(reply.headers)) ctx.res.writeHeader(k, v);
    // An answer given before the body was read to its end (an early 4xx/5xx) closes the
    // connection, so the unread rest can neither hang the client nor be parsed as a request.
    const close = reply.close || ctx.bodyPending || expectsUnreadBody(ctx);
    if (reply.status === 204) ctx.res.endWithoutBody(0, close);
    else ctx.res.end(payload, close);
  });
}
