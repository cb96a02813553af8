import { DEFAULT_RETRY_AFTER_SECONDS } from '../config/index.ts';
import { messageOf, retryAfter, ServiceError } from '../errors/index.ts';

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
//
// The ordinary lane takes the first SHARED_QUEUE waiters as they come (a burst of guesses
// from one address still waits there, as the throttle's tests expect); past that, a client
// network (an IPv4 address, an IPv6 /64: the login throttle's key) that already waits gets no
// further place, up to HASH_QUEUE in all. With first come, first served alone, a flood of
// wrong logins from 40 addresses filled the lane and an operator at a new address got 503
// (issue 40); now a flood holds at most SHARED_QUEUE places plus one per flooding network, so
// a newcomer finds a place until more than HASH_QUEUE - SHARED_QUEUE networks flood one worker
// at once. A waiting login holds no hash memory (the 128 MiB is taken when its hash starts),
// so the longer lane costs only the newcomer's wait behind it.

// One at a time per worker: the workers' hashes all meet in libuv's one FIFO pool, so the
// process hands it at most WORKERS of them (the default is 8 workers a core), and an
// operator first in one worker's lane waits behind at most one hash per other worker there.
// bench/login-flood.ts on the shared, loaded 2-core machine (WORKERS=2, 80 bogus logins in
// flight, one run each): the operator's login took 2.6 s median at 1 a worker (0.6 s
// alone), 8.4 s at 2.
export const HASHES_AT_ONCE = 1;
export const HASH_QUEUE = 64;
export const SHARED_QUEUE = 16;
export const QUEUED_PER_NETWORK = 1;

export class HashGate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly waitingFirst: (() => void)[] = [];
  /** ordinary-lane places held, by client network */
  private readonly waitingBy = new Map<string, number>();
  /** the Retry-After of a refusal: RETRY_AFTER_SECONDS once the API worker has configured its
   * gate (password.ts, configurePasswordChecks) */
  retryAfterSeconds = DEFAULT_RETRY_AFTER_SECONDS;

  constructor(
    private readonly running = HASHES_AT_ONCE,
    private readonly queued = HASH_QUEUE,
    private readonly perNetwork = QUEUED_PER_NETWORK,
    private readonly shared = SHARED_QUEUE,
  ) {}

  /** Runs `work` when a place is free (`first`: before every ordinary waiter); 503
   * server_busy at once when its lane is full or, in the ordinary lane past its shared
   * places, when `network` already holds its places there. */
  async run<T>(work: () => Promise<T>, first = false, network?: string): Promise<T> {
    if (this.active >= this.running) {
      const lane = first ? this.waitingFirst : this.waiting;
      const counted = first ? undefined : network;
      const held = counted === undefined ? 0 : (this.waitingBy.get(counted) ?? 0);
      if (lane.length >= this.queued || (counted !== undefined && held >= this.perNetwork && lane.length >= this.shared)) {
        throw new ServiceError('server_busy', messageOf('server_busy', 'password_checks'), retryAfter(this.retryAfterSeconds));
      }
      if (counted !== undefined) this.waitingBy.set(counted, held + 1);
      // the place is handed over by release(), so `active` never drops between the two
      await new Promise<void>((resolve) => lane.push(resolve));
      if (counted !== undefined) {
        const left = this.waitingBy.get(counted)! - 1;
        if (left === 0) this.waitingBy.delete(counted);
        else this.waitingBy.set(counted, left);
      }
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
