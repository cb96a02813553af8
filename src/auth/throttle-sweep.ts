import type { LoginThrottle } from '../store/index.ts';

/** How many password checks an API worker makes between two sweeps of the throttle's counts. */
export const SWEEP_EVERY = 256;

/** The login throttle's sweep (counts that no longer matter, known addresses past their time:
 * the store's sweepLoginThrottle), one per API worker. A spray of guesses from many networks
 * (an IPv6 /48 holds 65,536 /64s) leaves tens of thousands of counts, so the sweep runs every
 * SWEEP_EVERY password checks on this worker and at each administrator login, and never on a
 * login's path: it starts in the background, and the attempt that started it is answered
 * without waiting for it (a sweep of 200,000 counts takes seconds). One runs at a time on a
 * worker: what went stale while it ran waits for the next one. A sweep that fails is reported
 * to `onError`; the next one tries again, and the throttle's decisions never depend on a sweep
 * (a stale count reads as no count). */
export class ThrottleSweep {
  private checks = 0;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly store: Pick<LoginThrottle, 'sweepLoginThrottle'>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** A password check was asked for: every SWEEP_EVERY-th starts a sweep. */
  checked(at: number): void {
    if (++this.checks < SWEEP_EVERY) return;
    this.checks = 0;
    this.start(at);
  }

  /** Starts a sweep as of `at`, unless one is running or the worker is stopping. */
  start(at: number): void {
    if (this.running !== null || this.stopped) return;
    this.running = this.store
      .sweepLoginThrottle(at)
      .catch((err: unknown) => {
        // a sweep cut short by the store closing under it is the stop's doing, not a failure
        if (!this.stopped) this.onError(err);
      })
      .finally(() => {
        this.running = null;
      });
  }

  /** Whether a sweep is running. */
  get busy(): boolean {
    return this.running !== null;
  }

  /** Resolves when no sweep runs. */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  /** The worker is stopping: no sweep starts any more, and one cut short by the store's close
   * is not reported (what it left is the next start's to sweep). */
  stop(): void {
    this.stopped = true;
  }
}
