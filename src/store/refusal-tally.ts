import { now } from '../clock.ts';
import type { AuditRecord } from './records.ts';

// What a refused call costs the store (issue 44, section 3). Every verify answer used to leave
// an audit row of its own, about 1 KB on LMDB, kept RETENTION_AUDIT_DAYS (400 by default). A
// call refused before it held a capacity slot (401, 403, 404, 503 server_busy /
// module_unavailable / store_unavailable, or a client gone before its slot) costs the host
// almost nothing to answer, so nothing the host does bounds how many come: an 18-minute
// overload run wrote 433,080 rows for its 503s alone, and a flood of them grew the store
// without bound. Such refusals are counted instead, on each API worker, per UTC minute and
// per key (token, session, module, client address, status, error code):
// - the first refusal of a key in a minute is written at once as the row of its own it always
//   was (an operator looking for a refused call finds it as before, by its request id);
// - the others of that minute only add to its count; when the minute is over the row is
//   written again, in place (same time and request id), with `calls` (how many it stands
//   for), `last_at` and the longest latency. A lone refusal is never rewritten.
// A call that got a slot (a 200, a 4xx about its body, a 429, a 5xx of inference or
// settlement, a replay) is bounded by the host's capacity like a charged call, and keeps its
// row of its own.
//
// The bound: each API worker writes at most one row per key and minute, and at most
// REFUSAL_TALLY_MAX_KEYS keys a minute with their client address; past that, the minute's
// other refusals are counted without it (client_ip '*', country null), one row per (token,
// session, module, status, code). So however many calls are refused, a minute adds at most
// WORKERS x (REFUSAL_TALLY_MAX_KEYS + those keys) rows, and a refusal flood from one caller
// adds one row per API worker, status and code a minute: about 1 KB a minute where it was
// 1 KB a call (docs/capacity.md).
//
// What a crash may lose: the counts of the current minute on the worker that dies (its
// first rows are written already; a clean stop writes the counts first, at store close).
// The ledger is never concerned: a counted call was charged nothing.

/** Refusals are counted per bucket of this length (ms). */
export const REFUSAL_TALLY_BUCKET_MS = 60_000;
/** Keys with their client address a bucket holds; past it, the address is dropped from the key. */
export const REFUSAL_TALLY_MAX_KEYS = 1000;
/** The client address of a row counting the refusals past REFUSAL_TALLY_MAX_KEYS. */
export const MANY_CLIENTS = '*';

/** How the caller hears of a counted row that the store could not write (a full disk): the
 * row whole, so the log keeps what the store lost. */
export type RowLost = (err: unknown, row: AuditRecord) => void;

interface Row {
  /** the first call's line, as written (not changed: a queued write may still read it) */
  readonly record: AuditRecord;
  readonly bucket: number;
  /** calls counted after the first */
  more: number;
  lastAt: string;
  latencyMs: number;
  lost: RowLost;
}

export class RefusalTally {
  private readonly rows = new Map<string, Row>();
  /** keys with a client address, per bucket start */
  private readonly addressed = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    /** writes a row (`again` false: as a call's own row, which a row already there keeps), or
     * writes it again in place (`again`: same at and request_id, it replaces the row) */
    private readonly write: (row: AuditRecord, again: boolean) => Promise<void>,
    readonly bucketMs = REFUSAL_TALLY_BUCKET_MS,
    readonly maxKeys = REFUSAL_TALLY_MAX_KEYS,
    /** the service's clock (CLOCK_FILE in tests), which the records' times come from */
    private readonly clock: () => number = now,
  ) {}

  /** Counts one refused call: the first of its key and minute is written at once, the others
   * only counted. After close every call gets a row of its own (a stopping worker still
   * answers its last calls). */
  add(record: AuditRecord, lost: RowLost): void {
    if (this.closed) return this.writeRow(record, false, lost);
    const bucket = Math.floor(Date.parse(record.at) / this.bucketMs) * this.bucketMs;
    const rest = `${record.token_id}\u0000${record.session_id ?? ''}\u0000${record.module_id}\u0000${record.status}\u0000${record.error_code}`;
    let key = `${bucket}\u0000${record.client_ip}\u0000${rest}`;
    let row = this.rows.get(key);
    if (row === undefined && (this.addressed.get(bucket) ?? 0) >= this.maxKeys) {
      key = `${bucket}\u0000${MANY_CLIENTS}\u0000${rest}`;
      row = this.rows.get(key);
      // a row of many clients says so from its first write
      if (row === undefined) record = { ...record, client_ip: MANY_CLIENTS, country: null, calls: 1, last_at: record.at };
    } else if (row === undefined) {
      this.addressed.set(bucket, (this.addressed.get(bucket) ?? 0) + 1);
    }
    if (row === undefined) {
      this.rows.set(key, { record, bucket, more: 0, lastAt: record.at, latencyMs: record.latency_ms, lost });
      this.writeRow(record, false, lost);
      this.arm();
      return;
    }
    row.more++;
    if (record.at > row.lastAt) row.lastAt = record.at;
    if (record.latency_ms > row.latencyMs) row.latencyMs = record.latency_ms;
    row.lost = lost;
  }

  /** Keys counted in the current minutes (for tests). */
  get size(): number {
    return this.rows.size;
  }

  /** Writes again the rows of the buckets that have ended (all of them with `all`) that
   * counted more than their first call. */
  flush(all = false): Promise<void> {
    const at = this.clock();
    for (const [key, row] of this.rows) {
      if (!all && row.bucket + this.bucketMs > at) continue;
      this.rows.delete(key);
      this.addressed.delete(row.bucket);
      if (row.more > 0) this.writeRow({ ...row.record, calls: (row.record.calls ?? 1) + row.more, last_at: row.lastAt, latency_ms: row.latencyMs }, true, row.lost);
    }
    if (this.rows.size > 0) this.arm();
    return Promise.all([...this.inFlight]).then(() => undefined);
  }

  /** Writes every count, the current minute's included, and waits for the writes under way;
   * later calls get rows of their own. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush(true);
  }

  private writeRow(row: AuditRecord, again: boolean, lost: RowLost): void {
    let write: Promise<void>;
    try {
      write = this.write(row, again);
    } catch (err) {
      write = Promise.reject(err);
    }
    // Nobody awaits the write (a refusal's answer does not wait for it), so neither the write
    // nor the caller's report of its loss may end as a rejection: one left unhandled stops
    // the process. A report that throws has nowhere left to go.
    const written = write.catch((err: unknown) => {
      try {
        lost(err, row);
      } catch {
        // the row is lost to the store and to its report alike
      }
    });
    this.inFlight.add(written);
    void written.finally(() => this.inFlight.delete(written));
  }

  private arm(): void {
    if (this.timer || this.closed) return;
    let first = Infinity;
    for (const row of this.rows.values()) first = Math.min(first, row.bucket);
    // just after the oldest bucket ends; unref'd: the store's close writes what is left
    const wait = Math.min(Math.max(first + this.bucketMs - this.clock(), 0), this.bucketMs) + 50;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, wait);
    this.timer.unref();
  }
}
