import type { Database, Key, RangeOptions } from 'lmdb';
import { atomically } from './atomic.ts';
import { readLatest, type Store } from './open.ts';

// How LMDB reads a whole tree when it must (a pruner's first pass over a store not yet
// indexed, expiry.ts; the failed settlements' index built for an older store, settle.ts; the
// login throttle's sweep, login-throttle.ts).
// LMDB has one writer per store: a pruner that read a whole tree inside its write transaction
// held that writer for the whole read, and every verify call's reservation and settlement (the
// metering writer's commits) waited behind it: 1.05-1.45 s for 200,000 completed idempotency
// keys on this host, where an hour of the soak leaves 531,000 and a day of steady traffic
// millions (`bench/prune-lock.ts`). A read that never yields also holds the main thread, where
// the pruners run, for as long. So a tree is read in chunks, each in its own read snapshot,
// with a turn of the event loop between chunks, and no write open; what is written because of
// it goes in short write transactions that judge each entry again.

/** entries read per chunk of a scan */
export const SCAN_CHUNK = 1000;
/** entries removed per write transaction */
export const REMOVE_BATCH = 500;

/** The entries of `db` in `range`, read SCAN_CHUNK at a time, every chunk after the first
 * after a turn of the event loop. An entry written or removed meanwhile may be seen or not:
 * callers judge again inside the write that removes it. */
export async function* scanChunks<V>(db: Database<V, Key>, range: Pick<RangeOptions, 'start' | 'end'> = {}): AsyncGenerator<{ key: Key; value: V }> {
  let from = range.start;
  let first = true;
  for (;;) {
    const chunk = [...db.getRange({ ...(from === undefined ? {} : { start: from }), ...(range.end === undefined ? {} : { end: range.end }), exclusiveStart: !first, limit: SCAN_CHUNK })];
    yield* chunk;
    if (chunk.length < SCAN_CHUNK) return;
    from = chunk[chunk.length - 1]!.key;
    first = false;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The entries of `db` (in `range`) that `take` picks from scanChunks (from the latest commit),
 * handed to `write` `batch` to a write transaction, each read again inside it: an entry gone
 * meanwhile is skipped, and `write` judges the current value again (it may have changed since
 * the chunk was read). Returns how many times `write` said it removed its entry. `op` names
 * the writes in the store's failure figures. */
export async function judgeInChunks<V>(store: Store, db: Database<V, Key>, opts: { take: (key: Key, value: V) => boolean; write: (key: Key, value: V) => boolean; batch: number; op: string; range?: Pick<RangeOptions, 'start' | 'end'> }): Promise<number> {
  let removed = 0;
  let keys: Key[] = [];
  const flush = async () => {
    const batch = keys;
    keys = [];
    if (batch.length === 0) return;
    removed += await atomically(store, () => {
      let n = 0;
      for (const key of batch) {
        const value = db.get(key);
        if (value !== undefined && opts.write(key, value)) n++;
      }
      return n;
    }, opts.op);
  };
  readLatest(store);
  for await (const { key, value } of scanChunks(db, opts.range)) {
    if (opts.take(key, value)) keys.push(key);
    if (keys.length >= opts.batch) await flush();
  }
  await flush();
  return removed;
}

/** Removes the entries of `db` that `dead` calls so, REMOVE_BATCH to a write (judgeInChunks). */
export function removeWhere<V>(store: Store, db: Database<V, Key>, dead: (key: Key, value: V) => boolean, op: string): Promise<number> {
  return judgeInChunks(store, db, {
    take: dead,
    write: (key, value) => {
      if (!dead(key, value)) return false;
      void db.remove(key);
      return true;
    },
    batch: REMOVE_BATCH,
    op,
  });
}
