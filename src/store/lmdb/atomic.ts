import { TransactionFlags } from 'lmdb';
import type { Store } from './open.ts';
import { guardCommit } from '../write-health.ts';
import { putAuditLines, settleAuditLines, type QueuedAuditLine } from './audit-queue.ts';

// lmdb-js's transaction flags: abortable, synchronous commit, and NO_SYNC_FLUSH, which begins the LMDB transaction with MDB_NOSYNC. Under
// overlappingSync (lmdb-js's default on Linux) such a commit writes its pages and its
// meta page marked "not yet flushed", releases the write lock, and only then syncs the
// disk, still inside this call, unless another thread's sync already covered it. So the
// call returns with its commit on disk exactly as before, but the other API workers commit
// during its fdatasync instead of queueing behind it, and commits waiting on one sync share
// it. A power loss before the sync rolls the store back to the last flushed meta, never to
// a torn one (mdb.c, mdb_env_pick_meta: lmdb-js opens an overlappingSync environment with
// MDB_PREVSNAPSHOT); lmdb-js's own asynchronous writes commit this way. Without the flag
// each commit syncs inside the lock.
const SYNC_COMMIT_OVERLAPPED_FLUSH = TransactionFlags.ABORTABLE | TransactionFlags.SYNCHRONOUS_COMMIT | TransactionFlags.NO_SYNC_FLUSH;

/** The flags of a `sync` commit. Only an environment running overlappingSync syncs a
 * MDB_NOSYNC transaction after its commit; elsewhere (an environment first opened without
 * it, Windows) the flag would skip the sync altogether, so such a one keeps lmdb-js's
 * default (undefined: abortable, synchronous, synced inside the lock). */
export function syncCommitFlags(root: Store['root']): number | undefined {
  return (root as { overlappingSync?: boolean }).overlappingSync === true ? SYNC_COMMIT_OVERLAPPED_FLUSH : undefined;
}

/** One write transaction that is all or nothing; a throw anywhere in `fn` leaves nothing
 * behind. (An API worker's metering writes, reservation, settlement and refund, go to the
 * process's metering writer instead when it has one, writer.ts, which runs them this way for
 * every worker at once.) Two ways to commit it (Store.commits, from LMDB_COMMITS):
 * - `sync` (default): group-committed on the calling thread (commitGroup below). Every
 *   atomically() call a thread makes in one turn of its event loop (while its previous commit
 *   synced, messages and requests queue up; their reservations and settlements come in the
 *   same turn) runs in one lmdb-js `transactionSync`, each in a child transaction of its own,
 *   so a throw in one leaves the others whole; they share one commit and one disk sync. No
 *   round trip to lmdb-js's write thread, which cost a verify call about 0.4 ms for each of
 *   its two transactions (reserve, settle); the disk sync runs after the write lock is
 *   released (SYNC_COMMIT_OVERLAPPED_FLUSH), and returns once the commit is flushed.
 * - `batched`: an asynchronous transaction, which lmdb-js commits together with the other
 *   writes queued in the same turn: slower per call, but several times the commits per second
 *   when many calls write at once (bench/store.ts); it awaits the flush after the commit. It
 *   wraps `fn` in a child transaction, because lmdb-js commits the writes an asynchronous
 *   transaction made before its callback threw.
 * Either way a commit is on disk once this resolves, and it carries this thread's queued audit
 * lines (audit-queue.ts).
 * The caller waits while another thread or process holds LMDB's write lock; transactions are a
 * few record writes each, so that wait is short.
 *
 * Inside `fn` (and inside any lmdb-js `transaction` callback) a put or remove is applied to
 * the open transaction at once; the promise it returns only settles with that transaction,
 * whose failure the awaited commit reports. Such writes are therefore written `void db.put(...)`
 * (the lint's no-floating-promises). Outside a transaction a write must be awaited: a failed
 * commit there would otherwise be an unhandled rejection. `fn` must not call atomically()
 * itself (its commit would wait for this one).
 * A commit the store could not write (full disk, src/store/write-health.ts) is noted under
 * `op` on store.writes, and rejects like any other failure. */
export function atomically<T>(store: Store, fn: () => T, op = 'write'): Promise<T> {
  if (store.commits === 'batched') return batchedCommit(store, fn, op);
  return new Promise<T>((resolve, reject) => {
    let group = groups.get(store);
    if (!group) {
      group = [];
      groups.set(store, group);
      // setImmediate: after every callback of this turn's poll phase has queued its write
      setImmediate(() => commitGroup(store));
    }
    group.push({ fn, op, resolve: resolve as (v: unknown) => void, reject });
  });
}

interface Queued {
  fn: () => unknown;
  op: string;
  resolve: (v: unknown) => void;
  reject: (err: unknown) => void;
}

/** Each thread's (each Store's) transactions waiting for this turn's group commit. */
const groups = new WeakMap<Store, Queued[]>();

function commitGroup(store: Store): void {
  const group = groups.get(store)!;
  groups.delete(store);
  const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
  let carried: readonly QueuedAuditLine[] = [];
  try {
    store.root.transactionSync(() => {
      if (group.length === 1) {
        // alone: no child transaction; a throw aborts the one transaction, as it should
        outcomes.push({ ok: true, value: group[0]!.fn() });
      } else {
        for (const q of group) {
          try {
            outcomes.push({ ok: true, value: store.root.childTransaction(q.fn) });
          } catch (err) {
            outcomes.push({ ok: false, err });
          }
        }
      }
      carried = store.audit.take();
      putAuditLines(store.db, carried);
    }, syncCommitFlags(store.root));
  } catch (err) {
    // nothing of the group was committed: every caller hears this failure
    settleAuditLines(carried, err);
    for (const q of group) {
      store.writes.noteFailure(q.op, err);
      q.reject(err);
    }
    return;
  }
  settleAuditLines(carried, null);
  group.forEach((q, i) => {
    const out = outcomes[i]!;
    if (out.ok) q.resolve(out.value);
    else {
      store.writes.noteFailure(q.op, out.err);
      q.reject(out.err);
    }
  });
}

function batchedCommit<T>(store: Store, fn: () => T, op: string): Promise<T> {
  // This thread's queued audit lines ride in the transaction (audit-queue.ts): written after
  // `fn`, so a throw in `fn` leaves them queued for the next commit; settled with the commit.
  let carried: readonly QueuedAuditLine[] = [];
  const body = (): T => {
    const out = fn();
    carried = store.audit.take();
    putAuditLines(store.db, carried);
    return out;
  };
  // lmdb-js's asynchronous transaction resolves once committed and visible; its write thread
  // syncs afterwards, so the flush is awaited too: an answer that reports a charge leaves only
  // once the commit recording it is on disk (docs/metering.md "Commits and durability")
  return guardCommit(store.root.transaction(() => store.root.childTransaction(body)) as Promise<T>)
    .then(async (out) => {
      // root.flushed: the sync of the newest commit batch, this one or a later one that
      // covers it; a thenable, not a Promise, so it is resolved into one
      await guardCommit(Promise.resolve(store.root.flushed as PromiseLike<unknown>));
      settleAuditLines(carried, null);
      return out;
    })
    .catch((err: unknown) => {
      settleAuditLines(carried, err);
      store.writes.noteFailure(op, err);
      throw err;
    });
}

/** An asynchronous LMDB write outside atomically() (audit lines, sessions, the login
 * throttle): its failed commit is noted under `op` and rejects the caller's promise only. */
export function lmdbWrite<T>(store: Store, op: string, p: Promise<T>): Promise<T> {
  return guardCommit(p).catch((err: unknown) => {
    store.writes.noteFailure(op, err);
    throw err;
  });
}
