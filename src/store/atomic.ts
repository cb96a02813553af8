import type { Store } from './open.ts';

/** One write transaction that is all or nothing. lmdb-js commits the writes an asynchronous
 * transaction made before its callback threw; a child transaction inside it is rolled back
 * on a throw. Metering relies on this: a failure part-way through a charge, a settlement or
 * a refund must leave no half of it behind. */
export function atomically<T>(store: Store, fn: () => T): Promise<T> {
  return store.root.transaction(() => store.root.childTransaction(fn)) as Promise<T>;
}
