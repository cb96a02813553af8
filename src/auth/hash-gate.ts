import { retryAfter, ServiceError } from '../errors/index.ts';

// A password hash (scrypt, N=2^17) holds 128 MiB and a libuv pool thread for its whole run,
// and libuv's pool (4 threads by default) is shared with file I/O by every worker of the
// process. Unbounded, a flood of bogus logins queues hundreds of hashes there: memory grows
// with the flood and a real operator's login waits behind all of them (17.8 s was measured
// with 80 in flight). So each API worker hashes at most `running` at once and lets at most
// `queued` wait; past that the call is refused at once with 503 server_busy and Retry-After,
// the catalogue's "wait and retry" answer, and its password is never hashed.
//
// A login from an address its name has logged in from before (the throttle's "known"
// address, which an outsider cannot pick) waits in a lane of its own, served first and
// bounded apart, so a flood from elsewhere neither fills it nor stands in front of it.

// One at a time per worker: the workers' hashes all meet in libuv's one FIFO pool, so the
// process hands it at most WORKERS of them (the default is 8 workers a core), and an
// operator first in one worker's lane waits behind at most one hash per other worker there.
// bench/login-flood.ts on the shared, loaded 2-core machine (WORKERS=2, 80 bogus logins in
// flight, one run each): the operator's login took 2.6 s median at 1 a worker (0.6 s
// alone), 8.4 s at 2.
export const HASHES_AT_ONCE = 1;
export const HASH_QUEUE = 16;

export class HashGate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly waitingFirst: (() => void)[] = [];

  constructor(
    private readonly running = HASHES_AT_ONCE,
    private readonly queued = HASH_QUEUE,
  ) {}

  /** Runs `work` when a place is free (`first`: before every ordinary waiter); 503
   * server_busy at once when its lane is full. */
  async run<T>(work: () => Promise<T>, first = false): Promise<T> {
    if (this.active >= this.running) {
      const lane = first ? this.waitingFirst : this.waiting;
      if (lane.length >= this.queued) {
        throw new ServiceError('server_busy', 'Too many password checks in progress; retry after the indicated delay', retryAfter(1));
      }
      // the place is handed over by release(), so `active` never drops between the two
      await new Promise<void>((resolve) => lane.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  private release(): void {
    const next = this.waitingFirst.shift() ?? this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** hashes running and waiting, for tests and metrics */
  get load(): { active: number; waiting: number; waitingFirst: number } {
    return { active: this.active, waiting: this.waiting.length, waitingFirst: this.waitingFirst.length };
  }
}
