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
  /** a body was being read and is not complete: answering now must close the connection */
  bodyPending = false;
  /** set by body readers once they own the body */
  bodyRead = false;
  /** route pattern for logs and metrics, set by the router */
  route = 'unmatched';
  /** error code of the answer, for the request log */
  errorCode: string | undefined;
  status = 0;
  /** called once when the client goes away before the answer (slot release, cleanup) */
  private abortHandlers: (() => void)[] = [];

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
    res.onAborted(() => {
      this.aborted = true;
      for (const h of this.abortHandlers.splice(0)) h();
    });
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  searchParams(): URLSearchParams {
    return new URLSearchParams(this.query);
  }
}
