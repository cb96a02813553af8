import path from 'node:path';
import { MessageChannel, Worker, isMainThread, type MessagePort } from 'node:worker_threads';
import { SOURCE_DIR, SOURCE_EXT, threadEntry } from '../../source-ext.ts';
import type { Reservation } from '../records.ts';
import { atomically } from './atomic.ts';
import { settleAuditLines } from './audit-queue.ts';
import type { Store } from './open.ts';
import { fromWire, RESERVATION_HOLD_MS, SETTLE_HOLD, writerBusyWord, type SettleHold, type WriterOp, type WriterWake } from './writer-client.ts';

// The process's metering writer (docs/metering.md "Commits and durability"). Under the default
// LMDB_COMMITS=sync, every API worker used to commit its own reservations and settlements with
// transactionSync, and its event loop waited for the disk sync of each; workers shared syncs
// only when one thread's sync happened to cover another's commit (overlappingSync). Here one
// thread of the process, started by the main thread (writer-thread.ts), commits the metering
// writes of every API worker: each worker posts its reservation, settlement or refund as data
// (with the audit lines queued on it), the writer runs everything that arrived while its last
// commit synced in one transaction (a throw in a request's checks leaves the others whole; a
// throw in its writes fails the batch: writer-thread.ts runOne) with one sync, and only then
// answers each worker. So no API worker's event loop waits for a disk sync, and the more calls
// are in flight, the more of them share one sync. The answer that reports a charge still
// leaves only after the commit recording it is on disk: the writer answers a settlement (a
// refund, a mark) after transactionSync returned, and that returns after the sync (atomic.ts,
// SYNC_COMMIT_OVERLAPPED_FLUSH). A reservation needs no sync of its own (docs/metering.md
// "Commits and durability"), and lmdb-js has no commit without one: so the writer answers a
// reservation as soon as its writes have run, before its batch commits, and keeps a batch of
// such reservations open (bounded) until a write that must be synced joins it, so that they
// share its sync (writer-thread.ts holdForCompany).
//
// Only the metering writes travel (reserve, settle, its settlement_failed mark, refund, and the
// audit lines): every other write of an API worker (tokens, sessions, the login throttle) is
// rare and keeps atomically() on its own thread. Without a writer (the CLI, a store opened in a
// test or by the main thread itself, LMDB_COMMITS=batched, or a writer that is gone) every
// write commits on the calling thread as before.

/** A metering write: through the writer when this thread has one, else atomically() here.
 * `op` may be a function, so that work only the writer's path needs (settle's rendering) is
 * done only on that path; a throw there rejects like a failed write. */
export async function meteringWrite<T>(store: Store, op: WriterOp | (() => WriterOp), local: () => T, opName: string): Promise<T> {
  const client = store.writer;
  if (!client?.alive) return atomically(store, local, opName);
  const request = typeof op === 'function' ? op() : op;
  // this thread's queued audit lines ride along, as they would in its own commit; not on a
  // reservation, which is answered before its commit (writer-thread.ts): the lines wait for the
  // settlement (or their own commit), whose answer tells whether they were written
  const lines = request.op === 'reserve' ? [] : store.audit.take();
  const reply = await client.send(request, lines.map((l) => l.record));
  if (reply.ok) {
    settleAuditLines(lines, null);
    return reply.value as T;
  }
  const err = fromWire(reply.error);
  settleAuditLines(lines, reply.committed ? null : err);
  store.writes.noteFailure(opName, err);
  throw err;
}

/** The main thread's handle on the writer thread. */
export class MeteringWriter {
  private readonly worker: Worker;
  private exited = false;
  private readonly exit: Promise<void>;
  private nextId = 1;
  private readonly drains = new Map<number, (refunded: Reservation[]) => void>();
  /** the test's full-disk messages waiting for the thread's word (diskFull) */
  private readonly faults = new Map<number, (err: Error | null) => void>();

  /** the wake-up word every API worker's client bumps after a request (WriterClient) */
  private readonly wake = new Int32Array(new SharedArrayBuffer(4));
  /** since when the writer is in its current commit (writerBusyWord) */
  private readonly busy = writerBusyWord();

  /** `holdMs`: how long a batch of early-answered reservations waits for company
   * (RESERVATION_HOLD_MS); `settleHold`: how long a batch with settlements waits for more
   * (SETTLE_HOLD); tests set them */
  constructor(readonly dataDir: string, readonly storeDir: string, holdMs = RESERVATION_HOLD_MS, settleHold: SettleHold = SETTLE_HOLD, mapGiB?: number) {
    const entry = threadEntry('lmdb-writer.bundle.mjs', 'store/lmdb/writer-thread.ts');
    // Compiled, the thread runs its bundle; under tsx it registers the loader first (as the
    // API workers do, src/cluster/cluster.ts). A small young generation: its allocations are
    // a batch's few records.
    this.worker = new Worker(SOURCE_EXT === '.js' ? entry : new URL('thread-entry.mjs', SOURCE_DIR), {
      // mapGiB: the main thread's (it opened the environment first, and lmdb-js shares it), so
      // that no thread of the process asks for another map
      workerData: { entry: entry.href, dataDir, wake: this.wake, busy: this.busy, holdMs, settleHold, mapGiB },
      resourceLimits: { maxYoungGenerationSizeMb: 2 },
    });
    this.exit = new Promise((resolve) => {
      this.worker.once('exit', (code) => {
        this.exited = true;
        // the API workers' ports close with it and they commit on their own threads from now
        // on; said once on stderr, as the process's logger lives elsewhere
        for (const answer of this.drains.values()) answer([]);
        this.drains.clear();
        for (const answer of this.faults.values()) answer(new Error('the metering writer thread ended before it took the full disk'));
        this.faults.clear();
        if (code !== 0) process.stderr.write(`${JSON.stringify({ level: 50, msg: 'LMDB metering writer thread ended; API workers commit their own metering writes', code })}\n`);
        resolve();
      });
    });
    this.worker.on('message', (m: { type: 'drained'; id: number; refunded: Reservation[] } | { type: 'disk-full'; id: number }) => {
      if (m.type === 'disk-full') {
        this.faults.get(m.id)?.(null);
        this.faults.delete(m.id);
        if (this.faults.size === 0) this.worker.unref();
        return;
      }
      this.drains.get(m.id)?.(m.refunded);
      this.drains.delete(m.id);
    });
    // the process's lifetime is its API workers' and the cluster's, never this thread's
    this.worker.unref();
    this.worker.on('error', (err) => process.stderr.write(`${JSON.stringify({ level: 50, msg: 'LMDB metering writer thread failed', err: { message: err.message } })}\n`));
  }

  /** A new channel for an API worker: its end, to pass in its workerData (transferred); null
   * when the writer is gone. */
  connect(): { port: MessagePort; storeDir: string } | null {
    if (this.exited) return null;
    const { port1, port2 } = new MessageChannel();
    // the first message the worker's client reads, synchronously, when it opens the channel
    port1.postMessage({ wake: this.wake, busy: this.busy } satisfies WriterWake);
    this.worker.postMessage({ type: 'connect', port: port1 }, [port1]);
    return { port: port2, storeDir: this.storeDir };
  }

  /** For the recovery of dead API worker `thread`: resolves once the writer has run every
   * write the worker had posted and refunded what the writer reserved for it and nobody
   * settled, with those reservations. Bounded: a writer held in a transaction (a test fault)
   * answers nothing, and the caller's own scan then goes ahead. */
  drained(thread: number): Promise<Reservation[]> {
    if (this.exited) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise((resolve) => {
      // not unref'd: the writer thread is, and its answer must keep this thread waiting
      const timer = setTimeout(() => {
        this.drains.delete(id);
        resolve([]);
      }, WRITER_DRAIN_WAIT_MS);
      this.drains.set(id, (refunded) => {
        clearTimeout(timer);
        resolve(refunded);
      });
      this.worker.postMessage({ type: 'drain', id, thread });
    });
  }

  /** Testing only (test/verify/world.ts diskFull): a full disk under the writer. Its commits
   * fail with ENOSPC as LMDB's do, the next `commits` of them (Infinity: all; 0: none), and its
   * probe of the store finds no room, until this is called with null. Resolves once the thread
   * has taken it, which it does between two commits (writer-thread.ts). No setting or request
   * reaches it: only code holding this handle, on the main thread, can call it, and nothing in
   * src/ does, as nothing there sends the settlement's 'fail-commit' (writer-client.ts). */
  diskFull(commits: number | null): Promise<void> {
    if (this.exited) return Promise.reject(new Error('the metering writer has ended'));
    const id = this.nextId++;
    // the thread is unref'd: kept alive until it answers, as a test awaits it
    this.worker.ref();
    return new Promise((resolve, reject) => {
      this.faults.set(id, (err) => (err ? reject(err) : resolve()));
      this.worker.postMessage({ type: 'disk-full', id, commits });
    });
  }

  /** Commits what is queued, closes the writer's handle and ends the thread; one held in a
   * transaction (a test fault) is terminated after a while. */
  async close(): Promise<void> {
    if (this.exited) return;
    this.worker.postMessage({ type: 'close' });
    const timer = setTimeout(() => void this.worker.terminate(), WRITER_CLOSE_WAIT_MS);
    await this.exit;
    clearTimeout(timer);
  }
}

const WRITER_CLOSE_WAIT_MS = 5000;
const WRITER_DRAIN_WAIT_MS = 5000;

/** The writer of the main thread's store, started on first use (Cluster.spawn). */
const writers = new WeakMap<Store, MeteringWriter>();

export function meteringWriterOf(store: Store, holdMs?: number, settleHold?: SettleHold): MeteringWriter | null {
  if (!isMainThread || store.commits !== 'sync') return null;
  let w = writers.get(store);
  if (!w) {
    w = new MeteringWriter(path.dirname(store.dir), store.dir, holdMs, settleHold, store.mapGiB);
    writers.set(store, w);
  }
  return w;
}

/** What the store's writer refunded of dead API worker `thread` once it ran all it had posted
 * (MeteringWriter.drained); nothing without a writer. */
export function drainedByWriter(store: Store, thread: number): Promise<Reservation[]> {
  return writers.get(store)?.drained(thread) ?? Promise.resolve([]);
}

/** Ends the store's writer, if it has one (the store's close). */
export async function closeMeteringWriter(store: Store): Promise<void> {
  const w = writers.get(store);
  if (w) await w.close();
}
