import type { Store } from '../store/open.ts';

// Failed logins are counted per client address and per username in LMDB (`loginFailures`),
// so the count holds across API workers and restarts. A fixed window from the first failure:
// once a key reaches its limit, logins for it answer 429 until the window ends, without
// checking the password, which is what stops guessing. The username limit is the tighter
// one (guessing one account); the address limit covers spraying many usernames.
export const WINDOW_MS = 15 * 60_000;
export const USERNAME_LIMIT = 5;
export const ADDRESS_LIMIT = 20;

interface Failures {
  count: number;
  window_start: number;
}

type Key = { key: string; limit: number };

export function throttleKeys(address: string, username: string): Key[] {
  return [
    { key: `addr:${address}`, limit: ADDRESS_LIMIT },
    // usernames are matched exactly at login, but the lock should not be dodged by case
    { key: `user:${username.toLowerCase()}`, limit: USERNAME_LIMIT },
  ];
}

function live(f: Failures | undefined, at: number): Failures | undefined {
  return f && at - f.window_start < WINDOW_MS ? f : undefined;
}

/** Seconds until the login may be tried again, or 0 when it may be tried now. */
export function lockedFor(store: Store, keys: Key[], at: number): number {
  let wait = 0;
  for (const { key, limit } of keys) {
    const f = live(store.db.loginFailures.get(key) as Failures | undefined, at);
    if (f && f.count >= limit) wait = Math.max(wait, Math.ceil((f.window_start + WINDOW_MS - at) / 1000));
  }
  return wait;
}

let failuresSinceSweep = 0;

export async function recordFailure(store: Store, keys: Key[], at: number): Promise<void> {
  // a spray of made-up usernames leaves one record each; they are swept now and then
  if (++failuresSinceSweep >= 256) {
    failuresSinceSweep = 0;
    await sweepFailures(store, at);
  }
  await store.db.loginFailures.transaction(() => {
    for (const { key } of keys) {
      const f = live(store.db.loginFailures.get(key) as Failures | undefined, at);
      store.db.loginFailures.put(key, f ? { ...f, count: f.count + 1 } : { count: 1, window_start: at });
    }
  });
}

/** A correct password clears the username's count, not the address's: one success from an
 * address must not reset a spray from it. */
export async function clearUsername(store: Store, username: string): Promise<void> {
  await store.db.loginFailures.remove(`user:${username.toLowerCase()}`);
}

/** Deletes counts whose window has ended. */
export async function sweepFailures(store: Store, at: number): Promise<void> {
  const stale: string[] = [];
  for (const { key, value } of store.db.loginFailures.getRange({})) {
    if (!live(value as Failures, at)) stale.push(key as string);
  }
  if (stale.length > 0) await store.db.loginFailures.transaction(() => stale.forEach((k) => store.db.loginFailures.remove(k)));
}
