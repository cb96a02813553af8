import { ServiceError } from '../errors/index.ts';
import type { HttpResponse } from './uws.ts';

/** How slow an upload may be before it is answered 408 instead of being waited for. */
export interface PaceLimits {
  minBytesPerSecond: number;
  windowSeconds: number;
  deadlineSeconds: number;
}

// uWS 20.30 keeps its own clock on a request body: it re-arms a 10 s idle timer only after
// 160 KB (16 KB/s x 10 s) have arrived since the last re-arm, and when the timer fires it
// closes the socket with no answer. Nothing in its JavaScript API sets that rate, but
// HttpResponse.pause() disarms the socket's timer and resume() re-arms it at the full 10 s,
// whatever has arrived. So the timer moves here: while an upload is within its limits, one
// tick per second per API worker re-arms uWS's timer on every upload it paces (two epoll
// changes each, cheap next to the upload), and this pacer alone decides when an upload is too
// slow, and answers it. uWS's timer still guards everything outside an upload (headers,
// keep-alive, the drain after an early answer).
const TICK_MS = 1000;

interface Sample {
  at: number;
  bytes: number;
}

export interface PacedUpload {
  /** count bytes as they arrive */
  received(bytes: number): void;
  /** the upload ended (complete, failed or client gone): stop pacing it */
  done(): void;
}

interface Entry {
  res: HttpResponse;
  startedAt: number;
  bytes: number;
  samples: Sample[];
  onTimeout(err: ServiceError): void;
}

export class UploadPacer {
  private readonly active = new Set<Entry>();
  private timer: NodeJS.Timeout | null = null;
  private lastTick: number | null = null;

  constructor(private readonly limits: PaceLimits, private readonly clock: () => number = () => performance.now()) {}

  /** Paces an upload from now on; `onTimeout` is called once when it falls below the minimum
   * rate over the window, or outlives the deadline. */
  track(res: HttpResponse, onTimeout: (err: ServiceError) => void): PacedUpload {
    const at = this.clock();
    const entry: Entry = { res, startedAt: at, bytes: 0, samples: [{ at, bytes: 0 }], onTimeout };
    this.active.add(entry);
    this.timer ??= setInterval(() => this.tick(), TICK_MS).unref();
    return {
      received: (bytes) => {
        entry.bytes += bytes;
      },
      done: () => this.remove(entry),
    };
  }

  /** Ends the upload paced on `res` at once, as if it had timed out with `err` (its verify
   * slot went to another caller: src/http/capacity.ts). False when no upload is paced on `res`
   * (it is complete, or already ended). */
  end(res: HttpResponse, err: ServiceError): boolean {
    for (const e of this.active) {
      if (e.res !== res) continue;
      this.remove(e);
      e.onTimeout(err);
      return true;
    }
    return false;
  }

  /** Uploads being paced (for tests and metrics). */
  size(): number {
    return this.active.size;
  }

  private remove(entry: Entry): void {
    if (!this.active.delete(entry)) return;
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.lastTick = null;
    }
  }

  private tick(): void {
    const now = this.clock();
    // A late tick means this thread did not run for a while (CPU starved, a long GC): bytes
    // the kernel holds for it are not counted yet, because timers run before the poll phase
    // that delivers them. The client is not to blame, so nobody is judged on the rate this
    // tick; the next on-time tick counts those bytes in its window.
    const late = this.lastTick !== null && now - this.lastTick > 2 * TICK_MS;
    this.lastTick = now;
    const { minBytesPerSecond, windowSeconds, deadlineSeconds } = this.limits;
    const windowMs = windowSeconds * 1000;
    for (const e of [...this.active]) {
      const fault = this.check(e, now, windowMs, minBytesPerSecond * windowSeconds, deadlineSeconds * 1000, late);
      if (fault !== null) {
        this.remove(e);
        e.onTimeout(new ServiceError('request_timeout', fault));
        continue;
      }
      // Re-arm uWS's idle timer (see above); the upload is still within its limits.
      e.res.pause();
      e.res.resume();
    }
  }

  /** The rate is judged over every window of at least `windowSeconds` (up to one tick more),
   * so a client at or above the minimum is never cut off, however it groups its writes. */
  private check(e: Entry, now: number, windowMs: number, windowBytes: number, deadlineMs: number, late: boolean): string | null {
    if (now - e.startedAt >= deadlineMs) return `The upload did not finish within ${deadlineMs / 1000} s`;
    e.samples.push({ at: now, bytes: e.bytes });
    if (late) return null;
    // keep the newest sample at least a window old, and everything after it
    let base = -1;
    for (let i = e.samples.length - 1; i >= 0; i--) {
      if (now - e.samples[i]!.at >= windowMs) {
        base = i;
        break;
      }
    }
    if (base < 0) return null;
    if (base > 0) e.samples.splice(0, base);
    const got = e.bytes - e.samples[0]!.bytes;
    if (got < windowBytes) {
      return `The upload was slower than the minimum of ${windowBytes / (windowMs / 1000)} bytes/s (${got} bytes in the last ${Math.round((now - e.samples[0]!.at) / 100) / 10} s)`;
    }
    return null;
  }
}
