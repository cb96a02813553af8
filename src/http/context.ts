import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from './uws.ts';

/** Everything a handler may read about a request. uWS invalidates `req` when the handler
 * first returns or awaits, so method, path, query, headers and the peer address are all
 * copied here synchronously. */
export class HttpContext {
  readonly requestId = randomUUID();
  readonly startedAt = performance.now();
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: Record<string, string>;
  readonly peerAddress: string;
  aborted = false;
  finished = false;
  /** the request declares a body (Content-Length > 0 or Transfer-Encoding) */
  readonly expectsBody: boolean;
  /** the body's last chunk has arrived */
  bodyComplete = false;
  bodyReceived = 0;
  /** a reader stopped consuming the body (a limit or a syntax error): the connection is not
   * reused after the answer */
  bodyAbandoned = false;
  /** true while the uWS handler runs synchronously: the only time onData can still be attached */
  inHandlerTick = true;
  private bodyAttached = false;
  private bodyHandler: ((chunk: ArrayBuffer, isLast: boolean) => void) | null = null;
  /** chunks that arrived while the body was held (see holdUnclaimedBody), with their isLast */
  private held: [ArrayBuffer, boolean][] | null = null;
  /** route pattern for logs and metrics, set by the router */
  route = 'unmatched';
  /** error code of the answer, for the request log */
  errorCode: string | undefined;
  status = 0;
  /** headers every answer to this request carries (CORS), whatever path answers it */
  responseHeaders: Record<string, string> | null = null;
  /** called once when the client goes away before the answer (slot release, cleanup) */
  private abortHandlers: (() => void)[] = [];
  /** called once when the request is over for this connection: its answer written, or the
   * client gone (src/http/connections.ts counts held connections by it) */
  private settleHandlers: (() => void)[] | null = [];

  constructor(readonly res: HttpResponse, req: HttpRequest) {
    this.method = req.getCaseSensitiveMethod ? req.getCaseSensitiveMethod() : req.getMethod().toUpperCase();
    this.path = req.getUrl();
    this.query = req.getQuery() ?? '';
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    });
    this.headers = headers;
    this.peerAddress = Buffer.from(res.getRemoteAddressAsText()).toString();
    const len = headers['content-length'];
    this.expectsBody = (len !== undefined && len !== '0') || headers['transfer-encoding'] !== undefined;
    res.onAborted(() => {
      this.aborted = true;
      for (const h of this.abortHandlers.splice(0)) h();
      this.settle();
    });
  }

  /** The one place uWS's onData is attached; readers (and the drain after an early answer)
   * swap the handler, so a reader that gives up can hand the rest of the body to a drain. */
  readBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): boolean {
    this.bodyHandler = handler;
    if (this.held !== null) {
      // the first reader of a held body: what arrived meanwhile goes to it first
      const held = this.held;
      this.held = null;
      if (!this.aborted && !this.bodyComplete) this.res.resume();
      for (const [chunk, isLast] of held) handler(chunk, isLast);
      return true;
    }
    if (this.bodyAttached) return true;
    if (!this.inHandlerTick) {
      // after an await: a request without a body has nothing to hold, and its (empty) body has ended
      if (!this.expectsBody) {
        this.bodyComplete = true;
        handler(new ArrayBuffer(0), true);
        return true;
      }
      return false;
    }
    this.bodyAttached = true;
    this.res.onData((chunk, isLast) => {
      this.bodyReceived += chunk.byteLength;
      if (isLast) this.bodyComplete = true;
      this.bodyHandler?.(chunk, isLast);
    });
    return true;
  }

  /** Called at the end of the handler tick when the answer comes later. A body no handler
   * claimed yet is held: the socket is paused (TCP backpressure, nothing piles up here) and
   * the few chunks already read are kept, so a handler may claim the body after an await
   * (the store's token or session lookup is asynchronous with PostgreSQL), and an answer
   * decided without reading it can still drain it instead of closing over unread data. */
  holdUnclaimedBody(): void {
    if (!this.expectsBody || this.bodyAttached) return;
    const held: [ArrayBuffer, boolean][] = [];
    this.readBody((chunk, isLast) => {
      // uWS detaches the ArrayBuffer when this callback returns: copy it
      held.push([chunk.slice(0), isLast]);
      // nothing more to read: the connection must not stay paused for the answer or the
      // next request on it
      if (isLast) this.res.resume();
    });
    this.held = held;
    this.res.pause();
  }

  /** Body still to come: an answer now must drain it or close the connection. */
  bodyUnread(): boolean {
    return this.expectsBody && !this.bodyComplete;
  }

  /** Runs `handler` once the answer has been written or the client has gone. */
  onSettled(handler: () => void): void {
    if (this.settleHandlers === null) handler();
    else this.settleHandlers.push(handler);
  }

  /** The answer has been written (src/http/respond.ts), or the client left. */
  settle(): void {
    const handlers = this.settleHandlers;
    if (handlers === null) return;
    this.settleHandlers = null;
    for (const h of handlers) h();
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  searchParams(): URLSearchParams {
    return new URLSearchParams(this.query);
  }
}
