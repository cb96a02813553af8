/** Spreads keep-alive connections over the API workers.
 *
 * Every API worker listens on the same port (SO_REUSEPORT), and the kernel hands each new
 * connection to a worker by a hash of its addresses and ports. With many short-lived client
 * connections that evens out; with a few long-lived keep-alive ones (a load balancer's
 * upstream pool, a kiosk gateway, a benchmark client) it often does not: of 4 connections on
 * 2 workers, half the time 3 or 4 land on one worker, which then does all the HTTP work
 * (body, hashes, decoding, store) while the other idles. uWebSockets.js 20.30 has no way to
 * hand an accepted socket to another thread, so the fix is the one a proxy would use: a
 * worker that has recently answered clearly more than its share of verify calls closes the
 * connection after one answer (`Connection: close`, sent by uWS). The client opens a new one,
 * which the kernel hashes afresh; within a few such steps the connections are spread.
 *
 * The counters live in a SharedArrayBuffer made by the main thread, one per worker. A worker
 * looks at the shares at most once per window and sheds at most one connection per look, so a
 * balanced host sheds nothing and an unbalanced one a connection or two per second. */

export interface BalanceOptions {
  /** how often a worker compares its share with the others' (ms) */
  windowMs: number;
  /** the fewest verify calls on the whole host to judge shares by: a window with fewer runs
   * on until it has them */
  minCalls: number;
  /** shed when this worker's share of the window's calls exceeds ratio / workers */
  ratio: number;
}

export const BALANCE_DEFAULTS: BalanceOptions = { windowMs: 500, minCalls: 16, ratio: 1.25 };

/** Creates the shared counters (main thread). */
export function createBalanceTable(workers: number): SharedArrayBuffer {
  return new SharedArrayBuffer(workers * Int32Array.BYTES_PER_ELEMENT);
}

export class ConnectionBalance {
  private readonly counts: Int32Array;
  private readonly workers: number;
  private readonly seen: Int32Array;
  private windowStart: number;

  constructor(
    buffer: SharedArrayBuffer,
    private readonly worker: number,
    private readonly options: BalanceOptions = BALANCE_DEFAULTS,
    now = performance.now(),
  ) {
    this.counts = new Int32Array(buffer);
    this.workers = this.counts.length;
    this.seen = new Int32Array(this.workers);
    this.windowStart = now;
    this.snapshot();
  }

  /** Counts one verify call answered by this worker. True when this worker answered clearly
   * more than its share of the window that just ended: the caller closes this connection
   * after the answer. */
  answered(now = performance.now()): boolean {
    Atomics.add(this.counts, this.worker, 1);
    if (this.workers < 2 || now - this.windowStart < this.options.windowMs) return false;
    let total = 0;
    let mine = 0;
    for (let w = 0; w < this.workers; w++) {
      // counters wrap after 2^31 calls; the difference of two Int32 reads is right across it
      const delta = (Atomics.load(this.counts, w) - this.seen[w]!) | 0;
      total += delta;
      if (w === this.worker) mine = delta;
    }
    // too few calls to judge: the window runs on until there are enough
    if (total < this.options.minCalls) return false;
    this.windowStart = now;
    this.snapshot();
    return mine * this.workers > this.options.ratio * total;
  }

  private snapshot(): void {
    for (let w = 0; w < this.workers; w++) this.seen[w] = Atomics.load(this.counts, w);
  }
}
