// Login throttling rules, pure so that every store applies the same ones (LMDB here, the
// shared PostgreSQL store for several nodes). The rules are built so that knowing an
// operator's name is not enough to lock the operator out:
//  - one client address: 20 failures in 15 minutes (any names) answer 429 until the window
//    ends; this stops a spray from one place and only ever hurts that address;
//  - one address guessing one name: 5 failures in 15 minutes answer 429 for that pair only;
//  - one name from anywhere: after 5 failures, each further attempt waits a delay that
//    doubles per failure (1 s, 2 s, 4 s ... at most 5 minutes), measured from the last
//    failure and forgotten 15 minutes after it. A distributed guesser is slowed to one
//    guess per 5 minutes per name. Addresses the name has logged in from successfully in
//    the last 30 days skip this delay, so guessing from elsewhere never keeps the operator
//    out of a known address; from a new address the operator waits at most the delay.
export const WINDOW_MS = 15 * 60_000;
export const ADDRESS_LIMIT = 20;
export const PAIR_LIMIT = 5;
export const NAME_FREE_FAILURES = 5;
export const NAME_DELAY_CAP_S = 300;
export const KNOWN_ADDRESS_MS = 30 * 24 * 3_600_000;

export interface FailureCount {
  count: number;
  window_start: number;
  last_failure: number;
}

/** What the store holds about one login attempt's address and name. */
export interface ThrottleView {
  address?: FailureCount;
  pair?: FailureCount;
  name?: FailureCount;
  /** the name logged in successfully from this address within KNOWN_ADDRESS_MS */
  known: boolean;
}

/** Usernames are matched exactly at login, but throttling must not be dodged by case. */
export function throttleName(username: string): string {
  return username.toLowerCase();
}

export const addressKey = (address: string) => `addr:${address}`;
export const pairKey = (address: string, username: string) => `pair:${address}|${throttleName(username)}`;
export const nameKey = (username: string) => `user:${throttleName(username)}`;
export const knownKey = (address: string, username: string) => `known:${throttleName(username)}|${address}`;

// A count (or a device-session mint, device-sessions.ts) stamped more than a window after `at`
// was written before the clock was stepped back
// (NTP, an operator setting the time) by more than a window. Its age is unknown, so it is
// forgotten rather than read as live for the window plus the step: kept, it locked an address
// or a name out for an hour after a one-hour step back (review3, time). A count stamped a
// little after `at` is an attempt that raced this one (each takes its time before its
// transaction) and counts: forgetting it would let concurrent guesses reset their own count. A
// step back shorter than the window keeps its counts, which then last the window plus the step
// at most. A clock that goes back can only be the host's own; a guesser cannot cause it.
export function stampedAhead(stamp: number, at: number, windowMs = WINDOW_MS): boolean {
  return stamp - at > windowMs;
}

/** Address and pair counts run in a fixed window from their first failure. */
export function windowLive(f: FailureCount | undefined, at: number): f is FailureCount {
  return f !== undefined && !stampedAhead(f.window_start, at) && at - f.window_start < WINDOW_MS;
}

/** A name's count lives until 15 minutes after its last failure: a slow, steady guesser
 * keeps the delay at its cap instead of starting afresh every window. */
export function nameLive(f: FailureCount | undefined, at: number): f is FailureCount {
  return f !== undefined && !stampedAhead(f.last_failure, at) && at - f.last_failure < WINDOW_MS;
}

export function nameDelaySeconds(count: number): number {
  if (count < NAME_FREE_FAILURES) return 0;
  return Math.min(NAME_DELAY_CAP_S, 2 ** (count - NAME_FREE_FAILURES));
}

/** Seconds until this login may be tried, 0 when it may be tried now (password checked). */
export function throttleWait(v: ThrottleView, at: number): number {
  let wait = 0;
  const untilWindowEnd = (f: FailureCount) => Math.ceil((f.window_start + WINDOW_MS - at) / 1000);
  if (windowLive(v.address, at) && v.address.count >= ADDRESS_LIMIT) wait = Math.max(wait, untilWindowEnd(v.address));
  if (windowLive(v.pair, at) && v.pair.count >= PAIR_LIMIT) wait = Math.max(wait, untilWindowEnd(v.pair));
  if (!v.known && nameLive(v.name, at)) {
    const until = v.name.last_failure + nameDelaySeconds(v.name.count) * 1000;
    if (until > at) wait = Math.max(wait, Math.ceil((until - at) / 1000));
  }
  return wait;
}

/** The counts after one more failure at `at`. */
export function countFailure(f: FailureCount | undefined, live: boolean, at: number): FailureCount {
  return f && live ? { count: f.count + 1, window_start: f.window_start, last_failure: at } : { count: 1, window_start: at, last_failure: at };
}

// A login attempt is counted as a failure BEFORE its password is checked
// (reserveLoginAttempt in each store, read and write in one transaction): concurrent guesses
// then see each other's counts, so once a limit is spent the rest are refused without a
// password check. A success gives its address count back (AttemptSuccess) and clears the
// rest as a success always did; a failure leaves the reservation as its count, so a process
// that dies mid-check has still counted the guess.

/** What reserveLoginAttempt decided: `wait` seconds (0: reserved, the password may be
 * checked), and whether the name has logged in from this address (ThrottleView.known). */
export interface AttemptReservation {
  wait: number;
  known: boolean;
}

export type AttemptSuccess = {
  /** when the attempt was reserved: the address count is lowered by one unless its window
   * started after that (then the reservation was already forgotten with its window) */
  reservedAt?: number;
};
