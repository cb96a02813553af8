import { lmdbWrite } from './atomic.ts';
import type { Store } from './open.ts';
import { removeWhere } from './prune-scan.ts';
import {
  addressKey,
  countFailure,
  KNOWN_ADDRESS_MS,
  knownKey,
  nameKey,
  nameLive,
  pairKey,
  throttleWait,
  windowLive,
  type AttemptSuccess,
  type FailureCount,
  type AttemptReservation,
  type ThrottleView,
} from '../throttle-rules.ts';

export * from '../throttle-rules.ts';

// The LMDB side of the login throttle (rules in throttle-rules.ts). Records live in
// `loginFailures`, so the counts hold across API workers and restarts; every read starts
// from the latest commit, since the previous failure may have been counted on another
// worker a moment ago.
//
// Writes here all run inside db.transaction() callbacks, where lmdb applies put/remove to
// the open write transaction at once: the promises they return only repeat the
// transaction's own outcome, which the caller awaits, hence `void` on each.

export function readThrottle(store: Store, address: string, username: string, at: number): ThrottleView {
  store.root.resetReadTxn();
  return viewOf(store, address, username, at);
}

/** Reads through whatever transaction is current (inside db.transaction: the write one). */
function viewOf(store: Store, address: string, username: string, at: number): ThrottleView {
  const get = (k: string) => store.db.loginFailures.get(k) as FailureCount | undefined;
  const known = store.db.loginFailures.get(knownKey(address, username)) as { at: number } | undefined;
  return { address: get(addressKey(address)), pair: get(pairKey(address, username)), name: get(nameKey(username)), known: known !== undefined && at - known.at < KNOWN_ADDRESS_MS };
}

/** Seconds to wait (nothing written), or 0 with the attempt counted as a failure; and
 * whether the address is known for the name. The read and the write share one write
 * transaction, which LMDB runs one at a time across API workers and processes, so N
 * concurrent attempts are counted one after another and the limit's next one is refused
 * (see AttemptSuccess in throttle-rules.ts). */
export async function reserveLoginAttempt(store: Store, address: string, username: string, at: number): Promise<AttemptReservation> {
  const db = store.db.loginFailures;
  return lmdbWrite(store, 'login_throttle', db.transaction(() => {
    const view = viewOf(store, address, username, at);
    const wait = throttleWait(view, at);
    if (wait === 0) countOne(store, address, username, at);
    return { wait, known: view.known };
  }));
}

/** Seconds until the login may be tried again, or 0 when it may be tried now. */
export function loginWait(store: Store, address: string, username: string, at: number): number {
  return throttleWait(readThrottle(store, address, username, at), at);
}

/** Inside a write transaction: one more failure on the address, the pair and the name. */
function countOne(store: Store, address: string, username: string, at: number): void {
  const db = store.db.loginFailures;
  for (const [key, live] of [
    [addressKey(address), windowLive],
    [pairKey(address, username), windowLive],
    [nameKey(username), nameLive],
  ] as const) {
    const f = db.get(key) as FailureCount | undefined;
    void db.put(key, countFailure(f, live(f, at), at));
  }
}

export async function recordLoginFailure(store: Store, address: string, username: string, at: number): Promise<void> {
  await lmdbWrite(store, 'login_throttle', store.db.loginFailures.transaction(() => countOne(store, address, username, at)));
}

/** A correct password clears the name's counts and marks the address as known for the
 * name; the address's own count stays (one success must not reset a spray from it), less
 * the one this attempt reserved (`reservedAt`), so that only failures count there. */
export async function recordLoginSuccess(store: Store, address: string, username: string, at: number, success: AttemptSuccess = {}): Promise<void> {
  const db = store.db.loginFailures;
  await lmdbWrite(store, 'login_throttle', db.transaction(() => {
    void db.remove(pairKey(address, username));
    void db.remove(nameKey(username));
    void db.put(knownKey(address, username), { at });
    if (success.reservedAt !== undefined) giveBack(store, addressKey(address), success.reservedAt);
  }));
}

/** Inside a write transaction: one count less on `key`, when its window began by `reservedAt`. */
function giveBack(store: Store, key: string, reservedAt: number): void {
  const db = store.db.loginFailures;
  const f = db.get(key) as FailureCount | undefined;
  if (!f || f.count <= 0 || f.window_start > reservedAt) return;
  if (f.count === 1) void db.remove(key);
  else void db.put(key, { ...f, count: f.count - 1 });
}

export async function releaseLoginAttempt(store: Store, address: string, username: string, reservedAt: number): Promise<void> {
  await lmdbWrite(store, 'login_throttle', store.db.loginFailures.transaction(() => {
    for (const key of [addressKey(address), pairKey(address, username), nameKey(username)]) giveBack(store, key, reservedAt);
  }));
}

/** Deletes counts that no longer matter and known addresses past their time. The process runs
 * it once a minute (src/startup.ts, THROTTLE_SWEEP_MS) on its main thread, beside the inference
 * it relays, and a spray of failed logins from many networks (an IPv6 /48 holds 65,536 /64s)
 * leaves tens of thousands of counts: so it reads and removes them as the pruners read a tree
 * (prune-scan.ts removeWhere: chunks with the event loop turning between them, REMOVE_BATCH
 * removals to a write, each count judged again inside it). */
export async function sweepFailures(store: Store, at: number): Promise<void> {
  await removeWhere(store, store.db.loginFailures, (key, value) => {
    const k = key as string;
    return k.startsWith('known:')
      ? at - (value as { at: number }).at >= KNOWN_ADDRESS_MS
      : k.startsWith('user:')
        ? !nameLive(value as FailureCount, at)
        : !windowLive(value as FailureCount, at);
  }, 'login_throttle');
}
