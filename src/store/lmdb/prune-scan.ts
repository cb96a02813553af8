import type { Database, Key, RangeOptions } from 'lmdb';
import { atomically } from './atomic.ts';
import type { Store } from './open.ts';

// How LMDB's pruners find and remove what has expired. LMDB has one writer per store: a pruner
// that read a whole tree inside its write transaction held that writer for the whole read, and
// every verify call's reservation and settlement (the metering writer's commits) waited behind
// it: 1.05-1.45 s for 200,000 completed idempotency keys on this host, where an hour of the soak
// leaves 531,000 and a day of steady traffic millions (`bench/prune-lock.ts`). A read that never
// yields also holds the main thread, where the pruners run, for as long. So a tree is read in
// chunks, each in its own read snapshot, with a turn of the event loop between chunks, and no
// write open; what the read found expired is removed in batches, one short write transaction
// each, which reads every entry again and removes it only if it is still expired.
//
// The read itself stays: these trees are keyed by token and key, or by id, not by time, and a
// time index would be one more write on every verify call to save an hourly read (the PostgreSQL
// store has such indexes: src/store/pg/migrations.ts).

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

export interface PruneOptions<V> {
  /** the part of the tree to read (default: all of it) */
  range?: Pick<RangeOptions, 'start' | 'end'>;
  /** what goes with an expired entry, inside its write (default: the entry itself) */
  remove?: (key: Key, value: V) => void;
  /** the operation's name in the store's write-failure figures */
  op?: string;
}

/** Removes the entries of `db` whose value `expired` calls so, found by scanChunks and removed
 * REMOVE_BATCH to a write transaction; inside each write an entry is read again and removed only
 * if it is still there and still expired. Returns how many were removed. */
export async function pruneWhere<V>(store: Store, db: Database<V, Key>, expired: (value: V) => boolean, opts: PruneOptions<V> = {}): Promise<number> {
  const remove = opts.remove ?? ((key: Key) => void db.remove(key));
  let removed = 0;
  let batch: Key[] = [];
  const flush = async () => {
    const keys = batch;
    batch = [];
    if (keys.length === 0) return;
    removed += await atomically(store, () => {
      let n = 0;
      for (const key of keys) {
        const value = db.get(key);
        if (value !== undefined && expired(value)) {
          remove(key, value);
          n++;
        }
      }
      return n;
    }, opts.op ?? 'retention');
  };
  for await (const { key, value } of scanChunks(db, opts.range)) {
    if (expired(value)) batch.push(key);
    if (batch.length >= REMOVE_BATCH) await flush();
  }
  await flush();
  return removed;
}
