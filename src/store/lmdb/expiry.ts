import type { Database, Key } from 'lmdb';
import { atomically } from './atomic.ts';
import { BY_TOKEN_PRUNED_FLAG, EXPIRING_TREES, expiryFlag, readLatest, type ExpiringTree, type Store } from './open.ts';
import { judgeInChunks } from './prune-scan.ts';

// The expiry index: for each record that retention removes from a tree not keyed by time, an
// entry [tree, epoch ms, ...the record's key] (the value is unused), written in the transaction
// that gives the record its time (a key completed, a reservation settled, a result stored, a
// device session minted). A pruner then reads only what has expired, as a key range, where it
// read the whole tree every hour: a day of steady traffic keeps millions of idempotency keys
// and reservations, and RETENTION_RESULTS_DAYS (90 by default) keeps months of results
// (bench/prune-lock.ts). An entry is a hint, never the truth: the pruner reads the record again
// inside its write and removes it only if the record's own time says so, and drops the entry
// either way. So an entry whose record went (a key released) or got a later time (a key bound
// again and completed later, which wrote an entry of its own) costs one read once.
//
// A store written before the index has none: its first prune of each tree reads that tree in
// chunks as before, indexes what it keeps, and marks the tree indexed (a flag in `meta`); a new
// store starts with every tree indexed. A build older than the index, run on the store, writes
// records without entries, which would outlive their retention: a start that finds its calls
// in the ledger (held.ts) clears the flags, as `db migrate` does, and the next pass of each
// pruner indexes its tree again (docs/operations.md "Retention").

/** Each tree with entries, and the time of one of its records: null while it is kept
 * regardless (a pending key or reservation), else the ISO time its retention counts from. */
export const EXPIRING = {
  idempotency: (v: { state: string; completed_at: string | null }) => (v.state === 'completed' ? v.completed_at : null),
  reservations: (v: { state: string; settled_at: string | null }) => (v.state === 'charged' || v.state === 'refunded' ? v.settled_at : null),
  results: (v: { at: string }) => v.at,
  deviceSessions: (v: { expires_at: string }) => v.expires_at,
} satisfies Record<ExpiringTree, unknown>;

// A record's key is a string (reservations, results) or an array of two parts (idempotency:
// token and key; device sessions: 'id' and id); the entry's key ends with its parts.
const parts = (key: Key): Key[] => (Array.isArray(key) ? key : [key]);
const recordKey = (entry: Key): Key => {
  const rest = (entry as Key[]).slice(2);
  return rest.length === 1 ? rest[0]! : rest;
};

/** Writes the entry of `key`, a record of `tree` whose time is now `iso`; inside the write that
 * gives it that time. */
export function noteExpiry(store: Store, tree: ExpiringTree, iso: string, key: Key): void {
  // `void`: part of the caller's transaction, whose commit reports it
  void store.db.expiry.put([tree, Date.parse(iso), ...parts(key)], 1);
}

/** Records judged per write transaction. Removal goes in time order, which is random order in
 * trees keyed by client keys and ids, so each removal dirties a page of its own: at 500 a write,
 * another thread's commit waited up to 44 ms behind one; at 100, 4-5 ms, for the same total
 * time (`bench/prune-lock.ts`). */
export const EXPIRY_BATCH = 100;

export interface ExpiryPrune<V> {
  /** the part of the tree a first, indexing pass reads (default: all of it) */
  range?: { start: Key; end: Key };
  /** what goes with an expired record, inside its write (default: the record itself) */
  remove?: (key: Key, value: V) => void;
  /** the operation's name in the store's write-failure figures */
  op?: string;
}

/** Removes the records of `tree` (its database `db`) whose time is before `cutoff`, found
 * through the index, EXPIRY_BATCH entries to a write; returns how many records went. On a tree
 * not yet indexed, the pass reads the tree in chunks instead, and indexes it. */
export async function pruneExpired<V>(store: Store, tree: ExpiringTree, db: Database<V, Key>, cutoff: number, opts: ExpiryPrune<V> = {}): Promise<number> {
  const timeOf = EXPIRING[tree] as (v: V) => string | null;
  const expired = (v: V) => {
    const iso = timeOf(v);
    return iso !== null && Date.parse(iso) < cutoff;
  };
  const remove = opts.remove ?? ((key: Key) => void db.remove(key));
  const op = opts.op ?? 'retention';
  if (store.db.meta.get(expiryFlag(tree)) !== true) return indexWhilePruning(store, tree, db, expired, remove, op, opts.range);
  let removed = 0;
  for (;;) {
    // the latest commit: the previous batch's removals must not be read again
    readLatest(store);
    const entries = [...store.db.expiry.getKeys({ start: [tree, 0], end: [tree, cutoff], limit: EXPIRY_BATCH })];
    if (entries.length === 0) return removed;
    removed += await atomically(store, () => {
      let n = 0;
      for (const entry of entries) {
        const key = recordKey(entry);
        const value = db.get(key);
        if (value !== undefined && expired(value)) {
          remove(key, value);
          n++;
        }
        void store.db.expiry.remove(entry);
      }
      return n;
    }, op);
  }
}

/** The pass over a tree not yet indexed: read in chunks (prune-scan.ts); inside each write of
 * EXPIRY_BATCH, every record read is judged again, removed if expired, else given its entry;
 * once the whole tree is read, the tree is marked indexed. Records written meanwhile have
 * their entries already: whatever gives a record its time writes one. */
async function indexWhilePruning<V>(store: Store, tree: ExpiringTree, db: Database<V, Key>, expired: (v: V) => boolean, remove: (key: Key, v: V) => void, op: string, range?: { start: Key; end: Key }): Promise<number> {
  const timeOf = EXPIRING[tree] as (v: V) => string | null;
  const removed = await judgeInChunks(store, db, {
    take: (_key, value) => expired(value) || typeof timeOf(value) === 'string',
    write: (key, value) => {
      if (expired(value)) {
        remove(key, value);
        return true;
      }
      const iso = timeOf(value);
      if (typeof iso === 'string') noteExpiry(store, tree, iso, key);
      return false;
    },
    batch: EXPIRY_BATCH,
    op,
    ...(range ? { range } : {}),
  });
  await atomically(store, () => void store.db.meta.put(expiryFlag(tree), true), op);
  return removed;
}

/** Marks every tree not indexed, so that the next pass of each pruner reads its tree and
 * indexes what an older build wrote without entries (`db migrate`, recovery after another
 * build's writes). Entries already there stay: the pass writes the same keys again. The
 * per-token index is marked as possibly holding entries of rows an older build pruned too, so
 * the next prune drops them again (retention.ts). Returns the trees. */
export async function forgetExpiryIndex(store: Store): Promise<ExpiringTree[]> {
  await atomically(store, () => {
    for (const tree of EXPIRING_TREES) void store.db.meta.remove(expiryFlag(tree));
    void store.db.meta.remove(BY_TOKEN_PRUNED_FLAG);
  });
  return [...EXPIRING_TREES];
}
