import type { Store } from './open.ts';

/** One write transaction that is all or nothing; a throw anywhere in `fn` leaves nothing
 * behind. Two ways to commit it (Store.commits, from LMDB_COMMITS):
 * - `sync` (default): lmdb-js `transactionSync` on the calling thread. No round trip to
 *   lmdb-js's write thread, which cost a verify call about 0.4 ms for each of its two
 *   transactions (reserve, settle); each commit syncs the disk itself, so one thread's
 *   commits do not share a sync (about 2,200 a second here across the host).
 * - `batched`: an asynchronous transaction, which lmdb-js commits together with the other
 *   writes queued in the same turn: slower per call, but several times the commits per second
 *   when many calls write at once (bench/store.ts). It wraps `fn` in a child transaction,
 *   because lmdb-js commits the writes an asynchronous transaction made before its callback
 *   threw.
 * Either way a commit is visible to every thread and survives the process once this resolves.
 * The caller waits while another thread or process holds LMDB's write lock; transactions are a
 * few record writes each, so that wait is short. */
export function atomically<T>(store: Store, fn: () => T): Promise<T> {
  if (store.commits === 'batched') return store.root.transaction(() => store.root.childTransaction(fn)) as Promise<T>;
  try {
    return Promise.resolve(store.root.transactionSync(fn) as T);
  } catch (err) {
    return Promise.reject(err);
  }
}
