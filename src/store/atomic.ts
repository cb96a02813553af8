import type { Store } from './open.ts';

/** One write transaction that is all or nothing. It runs synchronously on the calling thread
 * (lmdb-js `transactionSync`): a throw aborts the whole transaction, and the commit costs no
 * round trip to lmdb-js's write thread. That round trip was about 0.4 ms of a verify call's
 * latency for each of its two transactions (reserve, settle), more than the writes themselves.
 * (An asynchronous transaction would also commit the writes its callback made before a throw.)
 * Durability is as before: with lmdb-js's default overlappingSync the commit is visible, and
 * survives the process, when this returns; the flush to disk follows in the background.
 * The caller waits while another thread or process holds LMDB's write lock; transactions are
 * a few record writes each, so that wait is short. */
export function atomically<T>(store: Store, fn: () => T): Promise<T> {
  try {
    return Promise.resolve(store.root.transactionSync(fn) as T);
  } catch (err) {
    return Promise.reject(err);
  }
}
