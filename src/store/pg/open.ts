import pg from 'pg';
import { hostName, hostUrl, type DatabaseTarget } from '../../config/index.ts';
import { StoreUnavailableError } from '../errors.ts';
import { noteStoreDown, noteStoreRecovered } from '../outages.ts';
import { WriteHealth } from '../write-health.ts';
import { HostSelector, selectingClient, type HostEvents } from './hosts.ts';

export interface PgOptions {
  /** how long a node's lease lasts without renewal; renewed every third of it */
  leaseMs?: number;
  /** refuse (StoreError, nothing created) a database without this service's schema instead of
   * migrating it: the CLI's commands that read a store that must exist (Command.existingStore) */
  existing?: boolean;
  /** connections per process (each API worker thread has its own pool) */
  poolSize?: number;
  /** per-statement limit, so a stuck database turns into an error, never a hang */
  statementTimeoutMs?: number;
  onError?: (err: Error) => void;
  /** the outage began (no writable host) and ended: for the log (src/store/pg/index.ts) */
  onDown?: HostEvents['down'];
  onRecovered?: HostEvents['recovered'];
  onSettlementResolved?: (r: SettlementResolved) => void;
  /** a settlement answered 200 whose commit the database lacked after an outage (lost-commits.ts) */
  onLostCommit?: (l: { reservation: string; outcome: 'restored' | 'refunded' }) => void;
}

// int8 (counts, epoch ms) arrives as a string by default; every such value here is far below
// 2^53, so a number is exact.
const types = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')),
};

export type Row = Record<string, any>;

export const isoOf = (ms: number) => new Date(ms).toISOString();

/** the database's clock as epoch ms (clock_timestamp: the moment of reading, not of the transaction's start) */
export const DB_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::float8';

/** A write owed to the database (see Pg.repairs): a refund, a settlement_failed mark, or a
 * settlement whose outcome is unknown, to resolve with the arguments it was made with
 * (settle.ts resolveSettlement). */
export type Repair =
  | { kind: 'refund'; at: number }
  | { kind: 'mark'; body: string | null }
  | { kind: 'settle'; at: number; args: unknown[]; keyed: boolean };

/** How a settlement of unknown outcome ended: charged (`already`: it had committed before the
 * connection broke) or refunded. */
export type SettlementResolved = { reservation: string; outcome: 'charged' | 'refunded'; already: boolean };

/** What every job of the PostgreSQL store works with: the pool, this process's node and
 * lease (lease.ts), and the writes it owes. */
export interface Pg {
  readonly pool: pg.Pool;
  /** which host of DATABASE_URL the pool's connections go to (hosts.ts) */
  readonly hosts: HostSelector;
  /** writes failing on the database's side (a full disk): see src/store/write-health.ts; the
   * probe is a write of this node's own row, which commits only when the database can write */
  readonly writes: WriteHealth;
  readonly leaseMs: number;
  readonly onError: ((err: Error) => void) | undefined;
  readonly onSettlementResolved: ((r: SettlementResolved) => void) | undefined;
  /** this process as a node (lease.ts), named on every reservation it makes */
  node: string;
  /** until when this node's lease is known to be held, in performance.now() time (this
   * thread's monotonic clock: see leaseHeld), never Date.now()'s */
  leaseOkUntil: number;
  /** the renewal in progress (lease.ts renew): one at a time, so the timer's and the one an
   * outage's end starts never race (one of them found the lease lapsed and registered a new
   * node while the other was still renewing the old one) */
  renewing: Promise<boolean> | null;
  /** Writes owed to the database from calls that failed while it was away: a reservation
   * whose call failed may still have committed (the connection can break after the commit),
   * and a settlement that failed must be marked for the operator. Until repaired such a
   * reservation would hold its key while this node stays alive, so each is retried after
   * every successful lease renewal (lease.ts). A node that dies instead has them swept by
   * another. */
  readonly repairs: Map<string, Repair>;
  /** The other nodes' leases this node's sweep found lapsed, each with the value it found and
   * when it first found that value (performance.now(), this process's monotonic clock): a
   * lease is swept only once it has stayed lapsed and unrenewed for a whole lease of this
   * node's own time (recovery.ts recoverPending says why). */
  watched: Map<string, { lease: string; since: number }>;
  /** `name`: a statement prepared once per connection (the hot path's calls), so the server
   * does not parse and plan it again on every call. */
  q(text: string, values?: unknown[], name?: string): Promise<pg.QueryResult<Row>>;
  /** one short transaction (operator paths) */
  tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T>;
}

/** Whether this node's lease is known to be held: renewed less than a lease ago by this
 * thread's monotonic clock. The wall clock is not asked: stepped forward (NTP, an operator) it
 * made a node renewing in time think its lease lapsed, and refuse the calls it held (its
 * settlement, refused by a database whose clock stepped with it, was not renewed and made);
 * stepped back, it made a node whose renewals had failed for longer than a lease think its
 * lease still held, and revive it and settle while another node may be sweeping it. The
 * database's own lease_until is still compared with its own now(). */
export function leaseHeld(db: Pick<Pg, 'leaseOkUntil'>): boolean {
  return performance.now() < db.leaseOkUntil;
}

/** The pool of this thread; the pool's 'error' events are handled, so a database restart
 * costs the calls in flight their answer (a StoreUnavailableError), never the thread. */
export function openPool(target: DatabaseTarget, opts: PgOptions): Pg {
  const hosts = new HostSelector(target, {
    down: (reason) => {
      noteStoreDown();
      opts.onDown?.(reason);
    },
    recovered: (info) => {
      noteStoreRecovered(info);
      opts.onRecovered?.(info);
    },
  });
  const db: Pg = {
    hosts,
    pool: new pg.Pool({
      // the first host's; each connection is pointed at the selected host (hosts.ts)
      connectionString: hostUrl(target, target.hosts[0]!),
      Client: selectingClient(hosts),
      max: opts.poolSize ?? 4,
      // the node's connections are told apart from other clients' in pg_stat_activity
      application_name: 'liveness-service',
      connectionTimeoutMillis: 5_000,
      statement_timeout: opts.statementTimeoutMs ?? 10_000,
      query_timeout: (opts.statementTimeoutMs ?? 10_000) + 2_000,
      idleTimeoutMillis: 30_000,
      types,
    }),
    writes: new WriteHealth(`pg:${target.hosts.map(hostName).join(',')}`, {
      probe: async () => {
        await db.pool.query('UPDATE nodes SET info = info WHERE id = $1', [db.node]);
        return true;
      },
    }),
    leaseMs: opts.leaseMs ?? 15_000,
    onError: opts.onError,
    onSettlementResolved: opts.onSettlementResolved,
    node: '',
    leaseOkUntil: 0,
    renewing: null,
    repairs: new Map(),
    watched: new Map(),
    async q(text, values = [], name) {
      for (let attempt = 1; ; attempt++) {
        try {
          const r = await db.pool.query(name === undefined ? { text, values } : { name, text, values });
          db.hosts.answered();
          return r;
        } catch (err) {
          // A deadlock or a serialization failure aborted the statement, which is its own
          // transaction here: nothing of it was written, so it runs again. Unretried, a refund
          // that lost a deadlock left the call's units held and its key stuck pending.
          if (attempt < CONFLICT_ATTEMPTS && isConflict(err)) continue;
          // a full disk (53100) and the like: counted, new verify calls refused until a write works
          db.writes.noteFailure(name ?? 'write', err);
          throw lost(db, unavailable(err));
        }
      }
    },
    async tx(fn) {
      let client: pg.PoolClient;
      try {
        client = await db.pool.connect();
      } catch (err) {
        throw lost(db, unavailable(err));
      }
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const out = await fn(client);
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch((e: Error) => (broken = e));
        throw lost(db, unavailable(err));
      } finally {
        client.release(broken);
      }
    },
  };
  // an idle client whose server went away emits here; unhandled, it would kill the thread
  db.pool.on('error', (err) => {
    hosts.lost(err.message);
    opts.onError?.(err);
  });
  return db;
}

/** Runs of one statement that a deadlock or serialization failure aborted (db.q). */
const CONFLICT_ATTEMPTS = 3;

/** SQLSTATE 40P01 (deadlock_detected) or 40001 (serialization_failure): the server aborted the
 * transaction to break a conflict between transactions; running it again is the remedy. */
function isConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** A statement that failed because the server went away (not one that timed out, nor a full
 * disk) starts an outage for the selector: the time to recover is counted from here. */
function lost(db: Pg, err: unknown): unknown {
  if (err instanceof StoreUnavailableError) {
    const code = String((err.cause as { code?: unknown } | undefined)?.code ?? '');
    if (code !== '57014' && !code.startsWith('53')) db.hosts.lost(err.message);
  }
  return err;
}

/** Connection-level failures (refused, reset, terminated, timed out, server shutting down)
 * become StoreUnavailableError; anything else (a constraint, a rule thrown by a check
 * callback) stays as it is, since retrying will not help. */
function unavailable(err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return err;
  const e = err as { code?: unknown; message?: unknown; severity?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  const connection =
    /^E[A-Z]+$/.test(code) || // ECONNREFUSED, ECONNRESET, EPIPE, ...
    /^(08|57P|53)/.test(code) || // SQLSTATE: connection exception, shutdown, resources
    code === '25006' || // read_only_sql_transaction: the host was demoted to a standby
    code === '57014' || // statement_timeout
    /Connection terminated|Connection ended|connection error|timeout/i.test(message);
  return connection ? new StoreUnavailableError(`store unavailable: ${message || String(err)}`, err) : err;
}
