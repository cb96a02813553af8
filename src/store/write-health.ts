import { BroadcastChannel } from 'node:worker_threads';

// Security issue 29 (item 5): a full disk. A write that cannot commit must neither take the
// process down nor be reported as something it was not. Every store keeps one WriteHealth:
// the failures it saw, whether new verify calls are refused (503 store_unavailable, before
// any upload or inference), the repairs (refunds) owed once writes work again, and a probe
// that finds out when they do, so the service resumes without a restart.
//
// Each thread (API workers, main) opens its own handle on the same store; a failure one of
// them sees concerns them all, so the state travels on a BroadcastChannel named after the
// store, within the process, without any wiring through the worker lifecycle.

// errno values (Linux; lmdb-js reports the errno as a number, Node as a name) and LMDB's own
// MDB_MAP_FULL: the disk, the quota, the device or the map cannot take the write
const STORAGE_ERRNOS = new Set<number>([28, 122, 5, 30, -30792]);
const STORAGE_CODES = new Set<string>(['ENOSPC', 'EDQUOT', 'EIO', 'EROFS', 'MDB_MAP_FULL',
  // PostgreSQL SQLSTATEs: disk_full, insufficient_resources, io_error
  '53100', '53000', '58030']);
const STORAGE_MESSAGE = /no space left on device|MDB_MAP_FULL|disk quota exceeded|read-only file system|could not extend file/i;

/** Whether `err` (or what caused it) says the store could not write: a full disk, quota or
 * map, an I/O error. lmdb-js rejects an asynchronous write whose commit failed with an error
 * carrying `commitError`; that is a failed write too. */
export function isStorageFailure(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; commitError?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'number' && STORAGE_ERRNOS.has(e.code)) return true;
  if (typeof e.code === 'string' && STORAGE_CODES.has(e.code)) return true;
  if (e.commitError !== undefined) return true;
  if (typeof e.message === 'string' && STORAGE_MESSAGE.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isStorageFailure(x, depth + 1))) return true;
  return isStorageFailure(e.cause, depth + 1);
}

/** lmdb-js rejects a failed asynchronous commit's writes with an error whose `commitError` is
 * one more promise, rejected with the cause. Nothing else ever awaits that promise, so without
 * a handler it is an unhandled rejection, which ends the thread (seen: "Commit failed" killed
 * an API worker and the main thread then ended the process). Every asynchronous LMDB write
 * goes through here. */
export function guardCommit<T>(p: Promise<T>): Promise<T> {
  return p.catch((err: unknown) => {
    const pending = (err as { commitError?: unknown } | null)?.commitError;
    // the cause is already in the error log (lmdb-js prints it); the caller gets `err`
    if (pending instanceof Promise) pending.catch(() => undefined);
    throw err;
  });
}

/** lmdb-js (3.5) also leaves a promise of its own behind on a failed asynchronous commit: the
 * one of the instruction that starts its next event-turn batch, which no caller holds, is
 * rejected with the same "Commit failed" error and never handled. Node then ends the thread
 * (the API worker, and with it the process). Every writer that awaited a write of that commit
 * has been told already, so this one is noted and dropped. Installed once per thread by
 * openStore; any other unhandled rejection keeps Node's default (thrown: the thread ends) unless
 * something else in the thread listens for them. */
/** A rejection lmdb-js leaves unhandled for a failed asynchronous write (it carries the
 * write's `commitError`): counted by the guard below, not a bug to report. */
export function isLmdbCommitRejection(reason: unknown): boolean {
  return (reason as { commitError?: unknown } | null)?.commitError !== undefined;
}

export function guardLmdbCommitRejections(): void {
  if (guarded) return;
  guarded = true;
  process.on('unhandledRejection', (reason) => {
    const pending = (reason as { commitError?: unknown } | null)?.commitError;
    if (pending !== undefined) {
      if (pending instanceof Promise) pending.catch(() => undefined);
      for (const l of failureListeners) l('commit');
      return;
    }
    if (process.listenerCount('unhandledRejection') === 1) throw reason;
  });
}
let guarded = false;

export interface WriteFailure {
  /** epoch ms of the first failure since writes last worked */
  since: number;
  /** the operation that failed first (reserve, settle, audit ...) */
  op: string;
  message: string;
}

type Broadcast = { type: 'failing'; failure: WriteFailure } | { type: 'ok' };

/** How often a store with failing writes tries again (and the repairs it owes). */
export const WRITE_PROBE_INTERVAL_MS = 500;

/** Every WriteHealth of this thread, for the metrics (src/observability/metrics.ts). */
const live = new Set<WriteHealth>();
const failureListeners = new Set<(op: string) => void>();

/** Called once per write failure this thread sees (lv_store_write_failures_total). */
export function onStoreWriteFailure(listener: (op: string) => void): void {
  failureListeners.add(listener);
}

/** Whether any store of this thread is failing writes (lv_store_writes_failing). */
export function storeWritesFailing(): boolean {
  for (const w of live) if (w.failing()) return true;
  return false;
}

/** How long a free-space reading stands before the next verify call or readiness asks again. */
export const FREE_SPACE_RECHECK_MS = 1000;

export interface WriteHealthOptions {
  /** answers whether a write commits now (lmdb/open.ts, pg/open.ts); may throw */
  probe: () => Promise<boolean>;
  /** bytes free for the store's files, where the store can tell (LMDB: its file system) */
  freeBytes?: () => Promise<number>;
  /** below this many free bytes, writes count as failing before one has failed */
  minFreeBytes?: number;
  /** a write that has not failed but has not ended either (LMDB: the metering writer in one
   * commit for STORE_STALL_SECONDS, open.ts), counted as failing while it lasts */
  stalled?: () => WriteFailure | null;
}

export class WriteHealth {
  private failure: WriteFailure | null = null;
  private spaceCheckedAt = -Infinity;
  private readonly repairs = new Map<string, () => Promise<unknown>>();
  private timer: NodeJS.Timeout | null = null;
  private probing = false;
  private closed = false;
  private readonly channel: BroadcastChannel;

  private readonly probe: () => Promise<boolean>;

  constructor(name: string, private readonly opts: WriteHealthOptions) {
    this.probe = opts.probe;
    this.channel = new BroadcastChannel(`lv-store-writes:${name}`);
    // a listener must not keep a thread alive that has nothing else to do
    this.channel.unref();
    this.channel.onmessage = (ev) => this.onBroadcast((ev as { data: Broadcast }).data);
    live.add(this);
  }

  /** A failed write (until a probe commits again), else a write that has not ended in time. */
  failing(): WriteFailure | null {
    return this.failure ?? this.opts.stalled?.() ?? null;
  }

  /** Looks at the free space now and then (at most once a second, without waiting for it):
   * a disk that fills up between two calls is seen before a write fails on it, which is
   * after inference when the reservation still found room and the settlement did not.
   * LMDB can commit into pages freed inside its file for a while on a full disk. */
  watchSpace(): void {
    const { freeBytes, minFreeBytes } = this.opts;
    if (!freeBytes || minFreeBytes === undefined || this.failure) return;
    const t = Date.now();
    if (t - this.spaceCheckedAt < FREE_SPACE_RECHECK_MS) return;
    this.spaceCheckedAt = t;
    void freeBytes().then((free) => {
      if (free >= minFreeBytes || this.failure || this.closed) return;
      this.failure = { since: Date.now(), op: 'free_space', message: `${free} bytes free for the store, below ${minFreeBytes}` };
      this.channel.postMessage({ type: 'failing', failure: this.failure } satisfies Broadcast);
      this.startProbe();
      // a file system that cannot be read is left to the writes themselves to report
    }, () => undefined);
  }

  /** Records a failed write when it is a storage failure (returns whether it was): counted,
   * new calls refused, the other threads told, the probe started. */
  noteFailure(op: string, err: unknown): boolean {
    if (!isStorageFailure(err)) return false;
    for (const l of failureListeners) l(op);
    if (this.closed) return true;
    if (!this.failure) {
      this.failure = { since: Date.now(), op, message: messageOf(err) };
      this.channel.postMessage({ type: 'failing', failure: this.failure } satisfies Broadcast);
    }
    this.startProbe();
    return true;
  }

  /** Work owed once writes work again (a refund of units held for a call whose settlement
   * could not be written): run before this thread says writes are back. Keyed, so retrying
   * the same repair does not queue it twice. */
  deferRepair(key: string, repair: () => Promise<unknown>): void {
    this.repairs.set(key, repair);
    this.startProbe();
  }

  /** Runs the probe and the owed repairs once, now; resolves whether writes work. The timer
   * calls it; tests and readiness may too. */
  async check(): Promise<boolean> {
    if (this.probing) return false;
    this.probing = true;
    try {
      if (!(await this.probe().catch(() => false)) || this.closed) return false;
      for (const [key, repair] of [...this.repairs]) {
        try {
          await repair();
          this.repairs.delete(key);
          if (this.closed) return false;
        } catch (err) {
          // still failing: kept for the next round
          if (isStorageFailure(err)) return false;
          // another kind of error will not resolve by waiting: counted (op "repair") and
          // dropped; a reservation it leaves pending is start-up recovery's (owner.ts)
          this.repairs.delete(key);
          for (const l of failureListeners) l('repair');
        }
      }
      if (this.failure) {
        this.failure = null;
        this.channel.postMessage({ type: 'ok' } satisfies Broadcast);
      }
      this.stopProbe();
      return true;
    } finally {
      this.probing = false;
    }
  }

  close(): void {
    // a check awaiting its probe now finds the channel closed and stops there
    this.closed = true;
    this.stopProbe();
    live.delete(this);
    this.channel.close();
  }

  private onBroadcast(msg: Broadcast): void {
    if (msg.type === 'failing') {
      this.failure ??= msg.failure;
      // every thread probes for itself: the one that saw the failure may be gone
      this.startProbe();
    } else if (this.repairs.size === 0) {
      this.failure = null;
      this.stopProbe();
    }
  }

  private startProbe(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // check() answers false while writes fail; probe and repair errors are caught inside,
      // and anything else is counted rather than left to end the thread
      void this.check().catch(() => {
        for (const l of failureListeners) l('probe');
      });
    }, WRITE_PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  private stopProbe(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

function messageOf(err: unknown): string {
  const e = err as { message?: unknown; cause?: unknown } | null;
  const own = typeof e?.message === 'string' ? e.message : String(err);
  const cause = e?.cause as { message?: unknown } | undefined;
  return typeof cause?.message === 'string' ? `${own}: ${cause.message}` : own;
}
