import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import type { StoredResults } from '../backend.ts';
import type { DeviceSession, DeviceSessionCall } from '../device-sessions.ts';
import type { AuditRecord, IdempotencyRecord, LedgerEntry, ModuleState, Reservation, SessionRecord, TokenRecord, UserRecord } from '../records.ts';
import type { FailureCount } from '../throttle-rules.ts';
import { StoreError } from '../errors.ts';
import { DEFAULT_LMDB_MAP_SIZE_GIB } from '../../config/index.ts';
import { narrowToPrivate, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-data.ts';
import { guardCommit, guardLmdbCommitRejections, WriteHealth, type WriteFailure } from '../write-health.ts';
import { AuditQueue, putAuditLines, type QueuedAuditLine } from './audit-queue.ts';
import { writeAuditLines, writerClientFor, type WriterClient } from './writer-client.ts';

// Bump when a record layout changes incompatibly; open() refuses a store written by
// another layout instead of misreading it.
export const SCHEMA_VERSION = 1;

const NAMES = [
  'meta', 'users', 'usersByName', 'tokens', 'tokenHashes', 'modules', 'counters', 'ledger',
  'idempotency', 'reservations', 'sessions', 'loginFailures', 'audit', 'results',
  // units of ledger entries removed by retention, per counter key (retention.ts)
  'ledgerPruned',
  // console indexes (token-names.ts, daily-totals.ts, by-token.ts): derived from the records
  // above and rebuilt from them when absent, so a store written before they existed opens
  'tokensByName', 'dailyTotals', 'byToken',
  // device sessions and their calls (src/store/lmdb/device-sessions.ts)
  'deviceSessions', 'deviceSessionCalls',
  // the reservations in settlement_failed, for the operator's list (settle.ts): derived, as above
  'failedSettlements',
  // [tree, epoch ms, ...key] -> 1: when retention may remove a record (expiry.ts): derived
  'expiry',
  // the pending reservations, for recovery (held.ts): derived
  'pendingReservations',
] as const;
export type DbName = (typeof NAMES)[number];

/** Each database with the record it holds and its key, so a read is typed by its database (no
 * `get(...) as X`). Three hold two kinds of entry, told apart by their key's first part. */
export interface Databases {
  /** schema_version and write_probe (numbers), the derived indexes' flags (true), ledger_high
   * (a ledger key, held.ts) */
  meta: Database<number | boolean | [ms: number, id: string], string>;
  users: Database<UserRecord, string>;
  /** username -> user id */
  usersByName: Database<string, string>;
  tokens: Database<TokenRecord, string>;
  /** token hash -> token id */
  tokenHashes: Database<string, string>;
  modules: Database<ModuleState, string>;
  /** units per counter key (usage.ts counterKey) */
  counters: Database<number, Key>;
  /** [epoch ms, entry id] */
  ledger: Database<LedgerEntry, Key>;
  /** [token id, Idempotency-Key] */
  idempotency: Database<IdempotencyRecord, Key>;
  reservations: Database<Reservation, string>;
  sessions: Database<SessionRecord, string>;
  /** a failure count per address, pair or name; `{ at }` for a known address (login-throttle.ts) */
  loginFailures: Database<FailureCount | { at: number }, string>;
  /** [epoch ms, request id] */
  audit: Database<AuditRecord, Key>;
  /** request id -> the results it answered */
  results: Database<StoredResults, string>;
  ledgerPruned: Database<number, Key>;
  /** [name key, token id] -> token prefix */
  tokensByName: Database<string, Key>;
  /** [charged, refunded] per day (and token, module) */
  dailyTotals: Database<[charged: number, refunded: number], Key>;
  /** presence only (1) */
  byToken: Database<1, Key>;
  /** ['id', id] -> the session; ['hash', hash] and the token's index -> its id */
  deviceSessions: Database<DeviceSession | string, Key>;
  /** the call by its key; ['r', reservation id] -> the call's key */
  deviceSessionCalls: Database<DeviceSessionCall | Key, Key>;
  /** reservation id -> 1, while that reservation is settlement_failed */
  failedSettlements: Database<1, string>;
  /** [tree, epoch ms, ...the record's key] -> 1 (expiry.ts) */
  expiry: Database<1, Key>;
  /** reservation id -> 1, while that reservation is pending (held.ts) */
  pendingReservations: Database<1, string>;
}

/** Meta flags of the derived indexes: set when an index is complete (token-names.ts,
 * daily-totals.ts). */
export const TOKEN_NAME_INDEX_FLAG = 'token_name_index_v1';
export const DAILY_TOTALS_FLAG = 'daily_totals_v1';
export const BY_TOKEN_FLAG = 'by_token_index_v1';
/** set once the per-token index holds no entry of a pruned row (retention.ts) */
export const BY_TOKEN_PRUNED_FLAG = 'by_token_pruned_v1';
export const FAILED_SETTLEMENTS_FLAG = 'failed_settlements_index_v1';
export const PENDING_INDEX_FLAG = 'pending_reservations_index_v1';
/** the highest ledger key written by a build that keeps the pending index (held.ts) */
export const LEDGER_HIGH = 'ledger_high';
/** The trees retention prunes through the expiry index (expiry.ts), each with its flag. */
export const EXPIRING_TREES = ['idempotency', 'reservations', 'results', 'deviceSessions'] as const;
export type ExpiringTree = (typeof EXPIRING_TREES)[number];
export const expiryFlag = (tree: ExpiringTree): string => `expiry_index_${tree}_v1`;
const DERIVED_INDEXES = [TOKEN_NAME_INDEX_FLAG, DAILY_TOTALS_FLAG, BY_TOKEN_FLAG, BY_TOKEN_PRUNED_FLAG, FAILED_SETTLEMENTS_FLAG, PENDING_INDEX_FLAG, ...EXPIRING_TREES.map(expiryFlag)];

/** How metering writes commit (docs/metering.md): `sync` on the calling
 * thread, one disk sync each (lowest latency); `batched` through lmdb-js's write thread, which
 * commits the writes of many concurrent calls together (highest throughput under load). */
export type LmdbCommits = 'sync' | 'batched';

export interface Store {
  readonly root: RootDatabase;
  readonly commits: LmdbCommits;
  readonly dir: string;
  /** the map this thread asked for (LMDB_MAP_SIZE_GIB): the metering writer opens with it too */
  readonly mapGiB: number;
  readonly db: Databases;
  /** failed writes, refusal of new calls while they fail, the probe that sees them work again */
  readonly writes: WriteHealth;
  /** this thread's audit lines waiting for its next write transaction (audit-queue.ts) */
  readonly audit: AuditQueue;
  /** an API worker's channel to the process's metering writer (writer.ts), or null: its
   * reservations, settlements and refunds commit on this thread */
  readonly writer: WriterClient | null;
  close(): Promise<void>;
}

/** LMDB's first page is a meta page whose magic (MDB_MAGIC, 0xBEEFC0DE) follows the page
 * header: 16 bytes in LMDB 0.9, 24 in the LMDB 1.0 that lmdb-js builds (a page txnid added). */
export function isLmdbDataFile(file: string): boolean {
  const head = Buffer.alloc(28);
  const fd = fs.openSync(file, 'r');
  try {
    if (fs.readSync(fd, head, 0, 28, 0) < 28) return false;
  } finally {
    fs.closeSync(fd);
  }
  return head.readUInt32LE(24) === 0xbeefc0de || head.readUInt32LE(16) === 0xbeefc0de;
}

/** Whether DATA_DIR holds an LMDB store (its data file), without opening, and so creating, one. */
export function lmdbStoreExists(dataDir: string): boolean {
  return fs.existsSync(path.join(dataDir, 'store', 'data.mdb'));
}

/** The soft limit on this process's address space (`ulimit -v`, systemd's LimitAS=), in bytes,
 * or null when there is none (or no /proc to read it from). */
function addressSpaceLimit(): number | null {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max address space'));
    const soft = line?.slice('Max address space'.length).trim().split(/\s+/)[0];
    return soft === undefined || soft === 'unlimited' ? null : Number(soft);
  } catch {
    return null;
  }
}

/** What LMDB would crash on, refused with a message first: a data.mdb that is not an LMDB file
 * (SIGSEGV, no output, for the server and the CLI alike), and a map larger than the address
 * space the process may have (SIGSEGV too). */
export function checkBeforeOpen(dir: string, mapBytes: number, limit = addressSpaceLimit()): void {
  const file = path.join(dir, 'data.mdb');
  const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0;
  if (size > 0 && !isLmdbDataFile(file)) throw new StoreError(`${file} is not an LMDB store (moved or written by something else?): the service will not open it`);
  // the map alone must fit, with some room for the process itself (V8's heaps, the threads'
  // stacks, the inference engine's memories): a map that cannot is a certain crash
  if (limit !== null && mapBytes + 2 * 1024 ** 3 > limit) {
    throw new StoreError(`the LMDB map of ${mapBytes / 1024 ** 3} GiB (LMDB_MAP_SIZE_GIB) does not fit this process's address-space limit of ${(limit / 1024 ** 3).toFixed(1)} GiB (ulimit -v, LimitAS=): lower LMDB_MAP_SIZE_GIB well under the limit, or raise the limit`);
  }
}

/** Opens (creating if needed) the LMDB environment under DATA_DIR/store. Every API worker
 * thread, the main thread and the CLI open the same files; LMDB serialises writers. */
export function openStore(dataDir: string, opts: { commits?: LmdbCommits; auditDelayMs?: number; writer?: WriterClient; stallMs?: number; mapGiB?: number } = {}): Store {
  const dir = path.join(dataDir, 'store');
  try {
    fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  } catch (e) {
    // one line naming DATA_DIR, not a stack (the CLI's exit 5, the server's start refused)
    throw new StoreError(`the store folder ${dir} cannot be made (is DATA_DIR right?): ${(e as Error).message}`);
  }
  // permissionsMode: the mode of data.mdb and lock.mdb, passed on to mdb_env_open (lmdb-js
  // reads it, its typings lack it; the default is 0664); a store made earlier is narrowed
  // mapSize: LMDB_MAP_SIZE_GIB (config/env.ts says why it is large). lmdb-js shares one
  // environment among a process's threads, so the first to open the store maps it: in the
  // service the main thread, before it starts the writer and the API workers.
  const mapGiB = opts.mapGiB ?? DEFAULT_LMDB_MAP_SIZE_GIB;
  const options = { path: dir, maxDbs: 32, mapSize: mapGiB * 1024 ** 3, compression: false, permissionsMode: PRIVATE_FILE_MODE };
  checkBeforeOpen(dir, options.mapSize);
  const root = open(options);
  narrowToPrivate([path.join(dir, 'data.mdb'), path.join(dir, 'lock.mdb')]);
  // each opened with the record type Databases names for it (lmdb-js does not check values)
  const db = Object.fromEntries(NAMES.map((name) => [name, root.openDB({ name })])) as unknown as Databases;
  const found = db.meta.get('schema_version');
  if (found === undefined) {
    // ifNoExists keeps two processes racing to create the store from both writing it.
    db.meta.transactionSync(() => {
      if (db.meta.get('schema_version') !== undefined) return;
      db.meta.putSync('schema_version', SCHEMA_VERSION);
      // a new store's derived indexes are complete (empty); older stores build them once
      for (const flag of DERIVED_INDEXES) db.meta.putSync(flag, true);
    });
  } else if (found !== SCHEMA_VERSION) {
    // `void`: nothing was written; the error below is what the caller needs
    void root.close();
    throw new StoreError(`store at ${dir} has schema version ${String(found)}, this build needs ${SCHEMA_VERSION}`);
  }
  guardLmdbCommitRejections();
  // an API worker of a service with the metering writer (LMDB_COMMITS=sync) sends it its
  // metering writes; a worker started without one, or any other thread, commits its own
  // (`opts.writer`: a channel given directly, as the tests do)
  const writer = (opts.commits ?? 'sync') === 'sync' ? (opts.writer ?? writerClientFor(dir)) : null;
  const stallMs = opts.stallMs ?? STORE_STALL_MS;
  const writes = new WriteHealth(path.resolve(dir), {
    probe: () => probeWrites(db.meta, dir),
    freeBytes: () => freeBytes(dir),
    minFreeBytes: WRITE_PROBE_FREE_BYTES,
    // A commit that neither ends nor fails (a stuck disk) would hold every metering write of
    // the process behind it, each call waiting without bound, while readiness said ready and
    // new calls joined the queue: past STORE_STALL_SECONDS the writes count as failing, so a
    // balancer takes the node out and new calls are refused before their upload, charged
    // nothing. The calls already waiting wait on: their commit may still come.
    stalled: writer ? () => stalledWriter(writer, stallMs) : undefined,
  });
  // the queue's own commit goes through the metering writer, or lmdb-js's write thread: off the
  // event loop either way; a failure is counted like any failed write and rejects the lines,
  // which the caller logs whole
  const audit = new AuditQueue(
    (lines: readonly QueuedAuditLine[]) => (writer?.alive ? writeAuditLines(writer, lines.map((l) => l.record)) : guardCommit(root.transaction(() => putAuditLines(db, lines)))).catch((err: unknown) => {
      writes.noteFailure('audit', err);
      throw err;
    }),
    opts.auditDelayMs,
  );
  return {
    root, dir, mapGiB, db, commits: opts.commits ?? 'sync', writes, audit, writer,
    close: async () => {
      // the queued lines first, so a clean stop loses none (bounded like the close below
      // while writes fail: a commit that cannot be written is not waited for)
      const failing = writes.failing() !== null;
      if (!failing) await audit.close();
      else await Promise.race([audit.close(), new Promise<void>((resolve) => setTimeout(resolve, CLOSE_WAIT_WHILE_FAILING_MS).unref())]);
      writes.close();
      if (!failing) return root.close();
      // lmdb-js's close waits for the flush of the last asynchronous commit, which never comes
      // when that commit failed (until a later asynchronous commit succeeds): a thread draining
      // on a full disk would wait for ever. Every commit is whole on disk or absent, so
      // nothing is lost by not waiting.
      return Promise.race([root.close(), new Promise<void>((resolve) => setTimeout(resolve, CLOSE_WAIT_WHILE_FAILING_MS).unref())]);
    },
  };
}

/** STORE_STALL_SECONDS's default (config/env.ts), for a store opened without configuration. */
export const STORE_STALL_MS = 10_000;

// The message names the bound, not the time run so far: readiness logs a failure once per
// message, so one that changed every second would log each probe of a balancer for as long as
// the stall lasts (`since` says how long).
function stalledWriter(writer: WriterClient, stallMs: number): WriteFailure | null {
  // the length on the monotonic clock, the date (for a person) on the wall clock
  const running = writer.commitRunning();
  if (running === null || running.ms < stallMs) return null;
  return { since: running.since, op: 'stalled', message: `a commit of the metering writer has run longer than STORE_STALL_SECONDS (${stallMs / 1000} s): a stuck disk?` };
}

/** Free bytes the store's file system must have before failing writes count as working again.
 * A write to a full disk can still commit when LMDB reuses pages freed inside its file, so a
 * probe write alone would call a full disk healthy; a verify call writes a few pages, and the
 * audit more over time, so a megabyte is room for hundreds of calls. */
export const WRITE_PROBE_FREE_BYTES = 1024 * 1024;

async function freeBytes(dir: string): Promise<number> {
  const st = await fs.promises.statfs(dir);
  return st.bavail * st.bsize;
}

/** Whether writes work: room on the file system and a small commit that succeeds. Not through
 * atomically(): a probe that fails is the expected answer, not one more failure to count. */
async function probeWrites(meta: Databases['meta'], dir: string): Promise<boolean> {
  if ((await freeBytes(dir)) < WRITE_PROBE_FREE_BYTES) return false;
  // asynchronous, like the audit's writes: after a failed asynchronous commit lmdb-js awaits a
  // flush that only a later asynchronous commit completes (root.close() waits for it)
  await guardCommit(meta.put('write_probe', Date.now()));
  return true;
}

/** How long close() waits for lmdb-js while writes are failing (see close). */
const CLOSE_WAIT_WHILE_FAILING_MS = 2000;

/** Moves this thread's LMDB read snapshot to the latest commit. lmdb-js keeps one read
 * transaction per thread until a setTimeout(0) resets it, so a request handled before that
 * timer fires reads the snapshot of an earlier turn and may miss what another API worker
 * (or the CLI) committed and already answered. Reads that must see such writes (operator
 * reads, tokens and sessions by hash, usage) call this first; it costs about 0.5 us. */
export function readLatest(store: Store): void {
  store.root.resetReadTxn();
}

/** A read that proves the environment answers; used by /health/ready. */
export function storeHealthy(store: Store): boolean {
  try {
    return store.db.meta.get('schema_version') === SCHEMA_VERSION;
  } catch {
    return false;
  }
}
