import { lmdbWrite } from './atomic.ts';
import type { Store } from './open.ts';
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
  type FailureCount,
  type ThrottleView,
} from './throttle-rules.ts';

export * from './throttle-rules.ts';

// The LMDB side of the login throttle (rules in throttle-rules.ts). Records live in
// `loginFailures`, so the counts hold across API workers and restarts; every read starts
// from the latest commit, since the previous failure may have been counted on another
// worker a moment ago.

export function readThrottle(store: Store, address: string, username: string, at: number): ThrottleView {
  store.root.resetReadTxn();
  const get = (k: string) => store.db.loginFailures.get(k) as FailureCount | undefined;
  const known = store.db.loginFailures.get(knownKey(address, username)) as { at: number } | undefined;
  return { address: get(addressKey(address)), pair: get(pairKey(address, username)), name: get(nameKey(username)), known: known !== undefined && at - known.at < KNOWN_ADDRESS_MS };
}

/** Seconds until the login may be tried again, or 0 when it may be tried now. */
export function loginWait(store: Store, address: string, username: string, at: number): number {
  return throttleWait(readThrottle(store, address, username, at), at);
}

let failuresSinceSweep = 0;

export async function recordLoginFailure(store: Store, address: string, username: string, at: number): Promise<void> {
  // a spray of made-up usernames leaves records; they are swept now and then
  if (++failuresSinceSweep >= 256) {
    failuresSinceSweep = 0;
    await sweepFailures(store, at);
  }
  const db = store.db.loginFailures;
  await lmdbWrite(store, 'login_throttle', db.transaction(() => {
    for (const [key, live] of [
      [addressKey(address), windowLive],
      [pairKey(address, username), windowLive],
      [nameKey(username), nameLive],
    ] as const) {
      const f = db.get(key) as FailureCount | undefined;
      // `void`: part of the transaction, whose commit lmdbWrite reports
      void db.put(key, countFailure(f, live(f, at), at));
    }
  }));
}

/** A correct password clears the name's counts and marks the address as known for the
 * name; the address's own count stays (one success must not reset a spray from it). */
export async function recordLoginSuccess(store: Store, address: string, username: string, at: number): Promise<void> {
  const db = store.db.loginFailures;
  await lmdbWrite(store, 'login_throttle', db.transaction(() => {
    void db.remove(pairKey(address, username));
    void db.remove(nameKey(username));
    void db.put(knownKey(address, username), { at });
  }));
}

/** Deletes counts that no longer matter and known addresses past their time. */
export async function sweepFailures(store: Store, at: number): Promise<void> {
  const stale: string[] = [];
  for (const { key, value } of store.db.loginFailures.getRange({})) {
    const k = key as string;
    const dead = k.startsWith('known:')
      ? at - (value as { at: number }).at >= KNOWN_ADDRESS_MS
      : k.startsWith('user:')
        ? !nameLive(value as FailureCount, at)
        : !windowLive(value as FailureCount, at);
    if (dead) stale.push(k);
  }
  if (stale.length > 0) await lmdbWrite(store, 'login_throttle', store.db.loginFailures.transaction(() => {
    for (const k of stale) void store.db.loginFailures.remove(k);
  }));
}
