import type { Database } from 'lmdb';
import type { AuditRecord } from '../records.ts';

// Audit lines on LMDB (docs/metering.md "Commits"). A line written by its own commit costs a
// commit and a sync on lmdb-js's write thread for every answer, which is as many commits as
// the calls' own metering writes. So an API worker queues its lines here, and the next write
// transaction of that worker (atomic.ts: a reservation, a settlement, a refund ...) writes them
// with its own writes: under load the line of one call rides in the next call's reservation
// (through the metering writer, writer.ts: in its settlement, as a reservation is answered
// before its commit), and costs no commit of its own. A worker that makes no metering commit for AUDIT_QUEUE_DELAY_MS
// (an idle one, or one refusing every call before its reservation) writes its queue in one
// commit of its own through lmdb-js's write thread, off the event loop.
//
// What a kill -9 may lose: the lines still queued, that is the lines of the answers this worker
// gave in the last AUDIT_QUEUE_DELAY_MS at most (or the last AUDIT_QUEUE_MAX lines), never a
// charge: the audit line is a record of the answer, not the charge, which the ledger holds.
// A clean stop (store close) writes the queue first.

/** How long a line may wait for a metering commit before it is written by a commit of its own. */
export const AUDIT_QUEUE_DELAY_MS = 25;
/** A queue this long is written at once, whatever the delay: bounds what a crash may lose. */
export const AUDIT_QUEUE_MAX = 256;

export interface QueuedAuditLine {
  readonly record: AuditRecord;
  /** null: committed; otherwise the commit's failure */
  readonly done: (err: unknown) => void;
}

/** The key of an audit line in the per-token index (by-token.ts): [db, token, epoch ms, id]. */
export function auditTokenIndexKey(r: AuditRecord): [string, string, number, string] | null {
  return r.token_id !== null ? ['audit', r.token_id, Date.parse(r.at), r.request_id] : null;
}

/** Puts the lines into the open write transaction (`void`: each put's promise settles with
 * that transaction, whose commit the caller reports through settleAuditLines). */
export function putAuditLines(db: { audit: Database<any, any>; byToken: Database<any, any> }, lines: readonly QueuedAuditLine[]): void {
  for (const { record } of lines) {
    void db.audit.put([Date.parse(record.at), record.request_id], record);
    const indexKey = auditTokenIndexKey(record);
    if (indexKey) void db.byToken.put(indexKey, 1);
  }
}

export function settleAuditLines(lines: readonly QueuedAuditLine[], err: unknown): void {
  for (const line of lines) line.done(err);
}

/** One API worker's (one Store's) lines waiting for a commit. */
export class AuditQueue {
  private lines: QueuedAuditLine[] = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly inFlight = new Set<Promise<void>>();

  /** `commitAlone` writes the lines in a commit of their own (the timer's path). */
  constructor(
    private readonly commitAlone: (lines: readonly QueuedAuditLine[]) => Promise<unknown>,
    readonly delayMs = AUDIT_QUEUE_DELAY_MS,
    readonly max = AUDIT_QUEUE_MAX,
  ) {}

  /** Resolves once a commit holding the line is done; rejects with that commit's failure (the
   * caller logs the line whole, so it is not lost), or at once after close. */
  push(record: AuditRecord): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the store is closed'));
    return new Promise<void>((resolve, reject) => {
      this.lines.push({ record, done: (err) => (err === null ? resolve() : reject(err)) });
      if (this.lines.length >= this.max) void this.flush();
      // not unref'd: a line waiting for its commit keeps the thread alive that long at most
      else this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
    });
  }

  get length(): number {
    return this.lines.length;
  }

  /** Every queued line, now out of the queue: the caller writes them in its transaction and
   * settles them with its commit's outcome. */
  take(): QueuedAuditLine[] {
    const out = this.lines;
    this.lines = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    return out;
  }

  /** Writes the queue in a commit of its own; resolves when that commit is done, either way. */
  flush(): Promise<void> {
    const lines = this.take();
    if (lines.length === 0) return Promise.resolve();
    let write: Promise<void>;
    try {
      write = this.commitAlone(lines).then(() => settleAuditLines(lines, null), (err: unknown) => settleAuditLines(lines, err));
    } catch (err) {
      settleAuditLines(lines, err);
      return Promise.resolve();
    }
    this.inFlight.add(write);
    return write.finally(() => this.inFlight.delete(write));
  }

  /** Writes what is queued and waits for the writes under way; later lines are refused. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    await Promise.all([...this.inFlight]);
  }
}
