import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { localNow, setClockOffset } from '../../clock.ts';
import { countFailure, KNOWN_ADDRESS_MS, nameLive, throttleName, throttleWait, windowLive, type AttemptSuccess, type FailureCount, type AttemptReservation, type ThrottleView } from '../throttle-rules.ts';
import { addressKey, nameKey, pairKey } from '../throttle-rules.ts';
import { ServiceError } from '../../errors/index.ts';
import { dayTotals, resetAt, windowKey } from '../periods.ts';
import { quotaRefusal } from '../quota.ts';
import type { ModuleId } from '../../packets/types.ts';
import type { JWK } from 'jose';
import type { AuditRecord, DailyTotal, Grant, KeyFile, KeyRevocation, LedgerEntry, Reservation, SessionRecord, TokenRecord, UsageRecord, UserRecord } from '../records.ts';
import { AUDIT_SCAN_BUDGET, type LedgerCheck, type Page, type PageQuery, type ReserveInput, type ReserveOutcome, type ResolveAction, type StoreBackend, type StoredResults, type UserPatch } from '../backend.ts';
import type { FaultHooks, SettlementFault } from '../faults.ts';
import { StoreError } from '../open.ts';
import { isStorageFailure, UnrecordedCallError, WriteHealth } from '../write-health.ts';
import { migrate } from './migrate.ts';
import { DuplicateTokenNameError, nameKey as tokenNameKey } from '../token-names.ts';
import type { SearchPage, SearchQuery } from '../token-search.ts';
import * as deviceSessions from './device-sessions.ts';
import type { DeviceSession, MintLimit } from '../device-sessions.ts';

const cmpPair = (a: readonly [string, string], b: readonly [string, string]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

export interface PgOptions {
  /** how long a node's lease lasts without renewal; renewed every third of it */
  leaseMs?: number;
  /** connections per process (each API worker thread has its own pool) */
  poolSize?: number;
  /** per-statement limit, so a stuck database turns into an error, never a hang */
  statementTimeoutMs?: number;
  onError?: (err: Error) => void;
}

/** The database does not answer: 503 server_busy with Retry-After, the spec's "wait and
 * retry with the same package and key" answer. Nothing was charged by the failed call (what
 * may have committed before the connection broke is repaired, see PgBackend.repairs). */
export class StoreUnavailableError extends ServiceError {
  constructor(message: string, cause: unknown) {
    super('server_busy', 'The store is not answering; retry after the indicated delay', { 'Retry-After': '1' }, cause);
    this.name = 'StoreUnavailableError';
    this.detail = message;
  }
  readonly detail: string;
}

// int8 (counts, epoch ms) arrives as a string by default; every such value here is far below
// 2^53, so a number is exact.
const types = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')),
};

type Row = Record<string, any>;

const isoOf = (ms: number) => new Date(ms).toISOString();
const cursorOf = (at: number, id: string) => Buffer.from(JSON.stringify([at, id])).toString('base64url');

function windowsOf(at: number) {
  const rd = resetAt('day', at)!;
  const rm = resetAt('month', at)!;
  return { day: windowKey('day', at), month: windowKey('month', at), resetDay: isoOf(rd), resetMonth: isoOf(rm) };
}

function reservationOf(r: Row): Reservation {
  return {
    id: r.id,
    request_id: r.request_id,
    token_id: r.token_id,
    module_id: r.module_id,
    units: r.units,
    state: r.state,
    windows: { day: r.day, month: r.month },
    created_at: r.created_at,
    settled_at: r.settled_at,
    pid: 0,
    node: r.node_id,
    idempotency_key: r.idempotency_key,
    unsaved_body: r.unsaved_body,
  };
}

/** The shared store for several nodes: every operation is one statement, one stored
 * function call, or (operator paths only) one short transaction. The pool's 'error' events
 * are handled, so a database restart costs the calls in flight their answer (a
 * StoreUnavailableError), never the thread. */
/** rows per retention statement: short enough not to hold row locks for long */
const PRUNE_BATCH = 1000;

/** the database's clock as epoch ms (clock_timestamp: the moment of reading, not of the transaction's start) */
const DB_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::float8';

export class PgBackend implements StoreBackend, FaultHooks {
  readonly kind = 'postgres' as const;
  settlementFault: SettlementFault | null = null;
  readonly pool: pg.Pool;
  private nodeId = '';
  private leaseOkUntil = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  /** migrations this process applied when it opened the store (npm run cli -- db migrate) */
  applied: number[] = [];
  private readonly leaseMs: number;
  /** Writes owed to the database from calls that failed while it was away: a reservation
   * whose call failed may still have committed (the connection can break after the commit),
   * and a settlement that failed must be marked for the operator. Until repaired such a
   * reservation would hold its key while this node stays alive, so each is retried after
   * every successful lease renewal. A node that dies instead has them swept by another. */
  private readonly repairs = new Map<string, { kind: 'refund'; at: number } | { kind: 'mark'; body: string | null }>();
  /** writes failing on the database's side (a full disk): see src/store/write-health.ts; the
   * probe is a write of this node's own row, which commits only when the database can write */
  readonly writes: WriteHealth;

  private constructor(url: string, private opts: PgOptions) {
    this.leaseMs = opts.leaseMs ?? 15_000;
    this.writes = new WriteHealth(`pg:${url}`, {
      probe: async () => {
        await this.pool.query('UPDATE nodes SET info = info WHERE id = $1', [this.nodeId]);
        return true;
      },
    });
    this.pool = new pg.Pool({
      connectionString: url,
      max: opts.poolSize ?? 4,
      // the node's connections are told apart from other clients' in pg_stat_activity
      application_name: 'liveness-service',
      connectionTimeoutMillis: 5_000,
      statement_timeout: opts.statementTimeoutMs ?? 10_000,
      query_timeout: (opts.statementTimeoutMs ?? 10_000) + 2_000,
      idleTimeoutMillis: 30_000,
      types,
    });
    // an idle client whose server went away emits here; unhandled, it would kill the thread
    this.pool.on('error', (err) => opts.onError?.(err));
  }

  /** Connects, applies pending migrations (under an advisory lock) and registers this
   * process as a node with a lease it keeps renewing. */
  static async open(url: string, opts: PgOptions = {}): Promise<PgBackend> {
    const b = new PgBackend(url, opts);
    try {
      b.applied = await migrate(b.pool);
      await b.register();
    } catch (err) {
      await b.pool.end().catch(() => {});
      const where = new URL(url);
      throw new StoreError(`cannot open the PostgreSQL store at ${where.host}${where.pathname}: ${(err as Error).message}`, { cause: err });
    }
    b.renewTimer = setInterval(() => void b.renew(), Math.max(50, Math.floor(b.leaseMs / 3)));
    b.renewTimer.unref();
    return b;
  }

  get node(): string {
    return this.nodeId;
  }

  private async register(): Promise<void> {
    const id = `node_${randomBytes(9).toString('base64url')}`;
    const info = { pid: process.pid, host: os.hostname() };
    const started = Date.now();
    const local = localNow();
    const r = await this.pool.query(`INSERT INTO nodes (id, info, lease_until) VALUES ($1, $2, now() + $3 * interval '1 millisecond') RETURNING ${DB_MS} AS db_ms`, [id, info, this.leaseMs]);
    this.followDatabaseClock(local, r.rows[0]!.db_ms);
    this.nodeId = id;
    this.leaseOkUntil = started + this.leaseMs;
  }

  /** Quota windows and record times follow the database's clock (src/clock.ts): the offset is
   * measured against the midpoint of the round trip, so it is off by at most half of it. */
  private followDatabaseClock(localBefore: number, dbMs: number): void {
    setClockOffset(Math.round(dbMs - (localBefore + localNow()) / 2));
  }

  /** Extends the lease; a lease found lapsed is not revived (another node may be refunding
   * its reservations): this process registers as a new node for what it reserves next. */
  async renew(): Promise<boolean> {
    const started = Date.now();
    const local = localNow();
    try {
      const r = await this.pool.query(
        `WITH renewed AS (UPDATE nodes SET lease_until = now() + $2 * interval '1 millisecond' WHERE id = $1 AND lease_until > now() RETURNING 1)
         SELECT (SELECT count(*)::int FROM renewed) AS renewed, ${DB_MS} AS db_ms`, [this.nodeId, this.leaseMs]);
      this.followDatabaseClock(local, r.rows[0]!.db_ms);
      if (r.rows[0]!.renewed === 1) this.leaseOkUntil = started + this.leaseMs;
      else await this.register();
      await this.repair();
      return true;
    } catch (err) {
      this.opts.onError?.(err as Error);
      return false;
    }
  }

  private async repair(): Promise<void> {
    for (const [id, job] of [...this.repairs]) {
      if (job.kind === 'refund') await this.pool.query('SELECT * FROM lv_refund($1, $2, $3, $4)', [id, job.at, isoOf(job.at), `led_${randomBytes(9).toString('base64url')}`]);
      else await this.pool.query(`UPDATE reservations SET state = 'settlement_failed', unsaved_body = $2 WHERE id = $1 AND state = 'pending'`, [id, job.body]);
      this.repairs.delete(id);
    }
  }

  /** writes still owed to the database (see repairs) */
  pendingRepairs(): number {
    return this.repairs.size;
  }

  /** Ready only while the database answers and this node's lease is known to be held. */
  async healthy(): Promise<boolean> {
    if (Date.now() >= this.leaseOkUntil) return false;
    try {
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.renewTimer);
    this.writes.close();
    // a node that leaves cleanly and holds nothing is forgotten at once
    await this.pool.query(`DELETE FROM nodes n WHERE n.id = $1 AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`, [this.nodeId]).catch(() => {});
    await this.pool.end();
  }

  /** `name`: a statement prepared once per connection (the hot path's calls), so the server
   * does not parse and plan it again on every call. */
  private async q(text: string, values: unknown[] = [], name?: string): Promise<pg.QueryResult<Row>> {
    try {
      return await this.pool.query(name === undefined ? { text, values } : { name, text, values });
    } catch (err) {
      // a full disk (53100) and the like: counted, new verify calls refused until a write works
      this.writes.noteFailure(name ?? 'write', err);
      throw unavailable(err);
    }
  }

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw unavailable(err);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch((e: Error) => (broken = e));
      throw unavailable(err);
    } finally {
      client.release(broken);
    }
  }

  // users and tokens

  async getUser(id: string) {
    return (await this.q('SELECT record FROM users WHERE id = $1', [id])).rows[0]?.record as UserRecord | undefined;
  }
  async getUserByName(username: string) {
    return (await this.q('SELECT record FROM users WHERE username = $1', [username])).rows[0]?.record as UserRecord | undefined;
  }
  async listUsers() {
    return (await this.q('SELECT record FROM users ORDER BY created_at, id')).rows.map((r) => r.record as UserRecord);
  }
  async createUser(user: UserRecord) {
    const r = await this.q('INSERT INTO users (id, username, record, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [user.id, user.username, user, user.created_at]);
    return r.rowCount === 1;
  }
  async updateUser(id: string, patch: UserPatch, check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void) {
    return this.tx(async (c) => {
      // the check may look at every user ("an admin remains"): lock them all, so two
      // concurrent changes cannot both pass it
      const all = (await c.query(check ? 'SELECT id, record FROM users ORDER BY id FOR UPDATE' : 'SELECT id, record FROM users WHERE id = $1 FOR UPDATE', check ? [] : [id])).rows;
      const user = all.find((r) => r.id === id)?.record as UserRecord | undefined;
      if (!user) return undefined;
      const next = { ...user, ...patch };
      check?.(user, next, all.filter((r) => r.id !== id).map((r) => r.record as UserRecord));
      await c.query('UPDATE users SET record = $2 WHERE id = $1', [id, next]);
      return next;
    });
  }
  async getToken(id: string) {
    return (await this.q('SELECT record FROM tokens WHERE id = $1', [id])).rows[0]?.record as TokenRecord | undefined;
  }
  async getTokenByHash(hash: string) {
    return (await this.q('SELECT record FROM tokens WHERE hash = $1', [hash])).rows[0]?.record as TokenRecord | undefined;
  }
  async listTokens() {
    return (await this.q('SELECT record FROM tokens ORDER BY created_at, id')).rows.map((r) => r.record as TokenRecord);
  }
  async insertToken(token: TokenRecord) {
    await this.tx(async (c) => {
      await this.checkNewTokenName(c, undefined, token);
      await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [token.id, token.hash, token, token.created_at]);
    });
  }
  /** The console's rule (token-names.ts): a new name may not match another token's, case and
   * Unicode composition ignored; duplicates that predate the rule stay. A transaction lock on
   * the name's key serialises two writers of one name on any node, without a unique index
   * that existing duplicates would break. */
  private async checkNewTokenName(c: pg.PoolClient, before: TokenRecord | undefined, after: TokenRecord) {
    const key = tokenNameKey(after.name);
    if (before && tokenNameKey(before.name) === key) return;
    await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`token-name:${key}`]);
    const taken = await c.query("SELECT 1 FROM tokens WHERE lower(normalize(record->>'name', NFC)) = $1 AND id <> $2 LIMIT 1", [key, after.id]);
    if (taken.rows.length > 0) throw new DuplicateTokenNameError(after.name);
  }
  async updateToken(id: string, change: (t: TokenRecord) => TokenRecord) {
    return this.tx(async (c) => {
      const t = (await c.query('SELECT record FROM tokens WHERE id = $1 FOR UPDATE', [id])).rows[0]?.record as TokenRecord | undefined;
      if (!t) return undefined;
      const next = change(t);
      await this.checkNewTokenName(c, t, next);
      await c.query('UPDATE tokens SET record = $2 WHERE id = $1', [id, next]);
      return next;
    });
  }
  async moduleEnabled(id: ModuleId) {
    const r = (await this.q('SELECT enabled FROM modules WHERE module_id = $1', [id])).rows[0];
    return r ? (r.enabled as boolean) : true;
  }
  async setModuleEnabled(id: ModuleId, enabled: boolean) {
    await this.q('INSERT INTO modules (module_id, enabled) VALUES ($1, $2) ON CONFLICT (module_id) DO UPDATE SET enabled = EXCLUDED.enabled', [id, enabled]);
  }

  // metering

  async reserve(input: ReserveInput): Promise<ReserveOutcome> {
    const { token, moduleId, units, requestId, idempotencyKey: key, fingerprint, at } = input;
    const w = windowsOf(at);
    const created = isoOf(at);
    // a same-key request admitted between the function's lookup and its claim answers
    // 'retry': the second call then sees it (a handful of rounds is plenty)
    for (let round = 0; ; round++) {
      const id = `rsv_${randomBytes(9).toString('base64url')}`;
      const sql = deviceSessions.reserveStatement(input.sessionId, [
        token.id, moduleId, units, requestId, key, fingerprint, at, created, w.day, w.month, id, `led_${randomBytes(9).toString('base64url')}`, this.nodeId,
      ]);
      const call = this.q(sql.text, sql.values, sql.name).catch((err: unknown) => {
        // the caller answers 503 and runs nothing: if the reservation did commit, give it back
        if (err instanceof StoreUnavailableError) this.repairs.set(id, { kind: 'refund', at });
        throw err;
      });
      const out = (await call).rows[0]!.r as { kind: string; code?: string; status?: number; body?: string; used?: number; max?: number; grant?: Grant };
      if (out.kind === 'reserved') {
        return {
          kind: 'reserved',
          reservation: {
            id, request_id: requestId, token_id: token.id, module_id: moduleId, units, state: 'pending', windows: { day: w.day, month: w.month },
            created_at: created, settled_at: null, pid: process.pid, node: this.nodeId, idempotency_key: key, unsaved_body: null,
          },
        };
      }
      if (out.kind === 'replay') return { kind: 'replay', status: out.status ?? 200, body: out.body ?? '' };
      if (out.kind === 'retry' && round < 5) continue;
      if (out.code === 'quota_exceeded') throw quotaRefusal(moduleId, out.grant!, out.used!, units, at)!;
      const sessionRefused = deviceSessions.sessionReserveError(out, units);
      if (sessionRefused) throw sessionRefused;
      if (out.code === 'request_in_progress' || out.kind === 'retry') throw new ServiceError('request_in_progress', undefined, { 'Retry-After': String(input.retryAfterSeconds) });
      throw new ServiceError(out.code as 'invalid_token' | 'module_forbidden' | 'idempotency_conflict' | 'settlement_failed');
    }
  }

  async settle(reservation: Reservation, at: number, render: (usage: UsageRecord[]) => string, results: unknown): Promise<string> {
    const injectFailure = this.settlementFault?.(results) ?? false;
    const w = windowsOf(at);
    // The body is rendered here with a placeholder for the usage array, and the function
    // fills in the usage as of the settlement itself: one call, and the saved body is the
    // answer. The placeholder is random, so no client text can imitate it.
    const marker = `"__usage_${randomBytes(12).toString('hex')}__"`;
    const template = render(JSON.parse(marker) as unknown as UsageRecord[]);
    let cause: unknown;
    if (!injectFailure) {
      try {
        const out = (
          await this.q('SELECT lv_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r', [
            reservation.id, at, isoOf(at), template, marker, { at: isoOf(at), token_id: reservation.token_id, module_id: reservation.module_id, results }, w.day, w.month, w.resetDay, w.resetMonth,
          ], 'lv_settle')
        ).rows[0]!.r as { ok: boolean; body?: string; state?: string };
        if (out.ok) return out.body!;
        // Refused: this node's lease lapsed (another node may be refunding it) or the
        // reservation is no longer pending. Never charged, so the client hears that
        // inference failed and its units are back (refund is idempotent).
        await this.refund(reservation.id, at).catch(() => {});
        throw new ServiceError('inference_failed', undefined, {}, new Error(`settlement refused: reservation ${reservation.id} is ${out.state ?? 'missing'} or its node lease lapsed`));
      } catch (err) {
        if (err instanceof ServiceError && !(err instanceof StoreUnavailableError)) throw err;
        cause = err;
      }
    } else cause = new Error('injected settlement failure (TEST_SETTLEMENT_FAIL_PREFIX)');
    if (isStorageFailure(cause)) {
      // the database could not write the settlement (a full disk): nothing was charged, so the
      // units go back now, or once it can write (repairs), and the answer says which
      const refunded = await this.refund(reservation.id, at).then(() => true, () => {
        this.repairs.set(reservation.id, { kind: 'refund', at });
        return false;
      });
      throw new UnrecordedCallError(refunded ? 'refunded' : 'refund_deferred', cause);
    }
    // The units stay reserved and the key pending for an operator; the answer that could not
    // be saved is kept on the reservation, so a "charge" resolution can complete the key.
    let marked: unknown = null;
    try {
      const usage = JSON.parse((await this.q('SELECT lv_usage_json($1, $2, $3, $4, $5) AS u', [reservation.token_id, w.day, w.month, w.resetDay, w.resetMonth])).rows[0]!.u as string) as UsageRecord[];
      await this.q(`UPDATE reservations SET state = 'settlement_failed', unsaved_body = $2 WHERE id = $1 AND state = 'pending'`, [reservation.id, render(usage)]);
    } catch (err) {
      marked = err;
      // owed: marked for the operator once the database answers again (unless it did commit);
      // without the usage as of settlement no answer is kept, so "charge" releases the key
      if (err instanceof StoreUnavailableError) this.repairs.set(reservation.id, { kind: 'mark', body: null });
    }
    throw new ServiceError('settlement_failed', undefined, {}, marked === null ? cause : new AggregateError([cause, marked], 'settlement failed, and marking it settlement_failed failed too'));
  }

  async refund(reservationId: string, at: number) {
    let rows: Row[];
    try {
      rows = (await this.q('SELECT * FROM lv_refund($1, $2, $3, $4)', [reservationId, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows;
    } catch (err) {
      // the units are owed back: refunded once the database answers again
      if (err instanceof StoreUnavailableError) this.repairs.set(reservationId, { kind: 'refund', at });
      throw err;
    }
    return rows[0] ? reservationOf(rows[0]) : undefined;
  }

  async resolveReservation(id: string, action: ResolveAction, at: number): Promise<Reservation | undefined | 'not_pending'> {
    return this.tx(async (c) => {
      const r = (await c.query('SELECT * FROM reservations WHERE id = $1 FOR UPDATE', [id])).rows[0];
      if (!r) return undefined;
      if (r.state !== 'settlement_failed') return 'not_pending' as const;
      if (action === 'refund') {
        return reservationOf((await c.query('SELECT * FROM lv_refund($1, $2, $3, $4)', [id, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows[0]!);
      }
      const next = (await c.query(`UPDATE reservations SET state = 'charged', settled_at = $2, settled_ms = $3, unsaved_body = NULL WHERE id = $1 RETURNING *`, [id, isoOf(at), at])).rows[0]!;
      if (r.idempotency_key !== null) {
        if (r.unsaved_body !== null) {
          await c.query(`UPDATE idempotency SET state = 'completed', completed_at = $4, completed_ms = $5, status = 200, body = $6 WHERE token_id = $1 AND key = $2 AND reservation_id = $3`, [r.token_id, r.idempotency_key, id, isoOf(at), at, r.unsaved_body]);
        } else {
          await c.query('DELETE FROM idempotency WHERE token_id = $1 AND key = $2 AND reservation_id = $3', [r.token_id, r.idempotency_key, id]);
        }
      }
      return reservationOf(next);
    });
  }

  async getReservation(id: string) {
    const r = (await this.q('SELECT * FROM reservations WHERE id = $1', [id])).rows[0];
    return r ? reservationOf(r) : undefined;
  }
  async listSettlementFailed() {
    return (await this.q(`SELECT * FROM reservations WHERE state = 'settlement_failed' ORDER BY created_at, id`)).rows.map(reservationOf);
  }
  async usageSnapshot(token: TokenRecord, at: number): Promise<UsageRecord[]> {
    const w = windowsOf(at);
    const keys = token.grants.map((g) => [g.module_id, g.period, windowKey(g.period, at)]);
    const rows = (
      await this.q(
        `SELECT k.m, coalesce(c.used, 0) AS used FROM jsonb_to_recordset($2::jsonb) AS k(m text, p text, w text)
           LEFT JOIN counters c ON c.token_id = $1 AND c.module_id = k.m AND c.period = k.p AND c.win = k.w`,
        [token.id, JSON.stringify(keys.map(([m, p, win]) => ({ m, p, w: win })))],
      )
    ).rows;
    const used = new Map(rows.map((r) => [r.m as string, r.used as number]));
    return token.grants.map((g) => {
      const u = used.get(g.module_id) ?? 0;
      return {
        module_id: g.module_id,
        limit: g.limit,
        period: g.period,
        used: u,
        remaining: g.limit === null ? null : Math.max(0, g.limit - u),
        reset_at: g.period === 'day' ? w.resetDay : g.period === 'month' ? w.resetMonth : null,
      };
    });
  }

  private async page<T>(table: 'ledger' | 'audit', q: PageQuery, row: (r: Row) => T, idCol: string): Promise<Page<T>> {
    const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
    const where = ['at_ms >= $1', 'at_ms < $2'];
    const values: unknown[] = [q.from ?? 0, q.to ?? Number.MAX_SAFE_INTEGER];
    const desc = q.order === 'desc';
    if (q.cursor) {
      const [cAt, cId] = JSON.parse(Buffer.from(q.cursor, 'base64url').toString('utf8')) as [number, string];
      values.push(cAt, cId);
      where.push(`(at_ms, ${idCol}) ${desc ? '<' : '>'} ($${values.length - 1}, $${values.length})`);
    }
    const col = table === 'ledger' ? 'token_id' : "record->>'token_id'";
    const mcol = table === 'ledger' ? 'module_id' : "record->>'module_id'";
    if (q.token_id) where.push(`${col} = $${values.push(q.token_id)}`);
    if (q.module_id) where.push(`${mcol} = $${values.push(q.module_id)}`);
    const rows = (await this.q(`SELECT * FROM ${table} WHERE ${where.join(' AND ')} ORDER BY at_ms ${desc ? 'DESC' : ''}, ${idCol} ${desc ? 'DESC' : ''} LIMIT ${limit + 1}`, values)).rows;
    const more = rows.length > limit;
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return { items: items.map(row), next_cursor: more && last ? cursorOf(last.at_ms, last[idCol]) : null };
  }

  listLedger(q: PageQuery): Promise<Page<Omit<LedgerEntry, 'windows'>>> {
    return this.page('ledger', q, (r) => ({ id: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, kind: r.kind, at: isoOf(r.at_ms) }), 'id');
  }

  // Retention: each batch is one statement (its own transaction), at most PRUNE_BATCH rows,
  // with SKIP LOCKED so nodes pruning at once take different rows and never wait on each other.
  private async pruneBatches(sql: string, args: unknown[]): Promise<number> {
    let removed = 0;
    for (;;) {
      const n = (await this.q(sql, args)).rows[0]!.n as number;
      removed += n;
      if (n === 0) return removed;
    }
  }

  pruneAuditBefore(cutoff: number) {
    return this.pruneBatches(`
      WITH doomed AS (
        DELETE FROM audit WHERE (at_ms, request_id) IN (
          SELECT at_ms, request_id FROM audit WHERE at_ms < $1 ORDER BY at_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
        RETURNING 1)
      SELECT count(*)::int AS n FROM doomed`, [cutoff]);
  }

  pruneResultsBefore(cutoff: number) {
    return this.pruneBatches(`
      WITH doomed AS (
        DELETE FROM results WHERE request_id IN (
          SELECT request_id FROM results WHERE record->>'at' < $1 ORDER BY record->>'at' LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
        RETURNING 1)
      SELECT count(*)::int AS n FROM doomed`, [isoOf(cutoff)]);
  }

  /** Entries and their units move to ledger_pruned in the same statement: never one without the other. */
  pruneLedgerBefore(cutoff: number) {
    return this.pruneBatches(`
      WITH doomed AS (
        DELETE FROM ledger WHERE id IN (
          SELECT id FROM ledger WHERE at_ms < $1 ORDER BY at_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
        RETURNING token_id, module_id, units, kind, day, month),
      totals AS (
        SELECT token_id, module_id, p.period, p.win, sum(CASE kind WHEN 'charge' THEN units ELSE -units END) AS units
        FROM doomed, LATERAL (VALUES ('day', day), ('month', month), ('never', 'all')) AS p(period, win)
        GROUP BY token_id, module_id, p.period, p.win),
      kept AS (
        INSERT INTO ledger_pruned AS lp (token_id, module_id, period, win, units) SELECT * FROM totals
        ON CONFLICT (token_id, module_id, period, win) DO UPDATE SET units = lp.units + EXCLUDED.units)
      SELECT count(*)::int AS n FROM doomed`, [cutoff]);
  }

  async verifyLedger(): Promise<LedgerCheck> {
    return this.tx(async (c) => {
      // one snapshot for both sides, or a reservation between the two reads would show as a mismatch
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      const entries = (await c.query('SELECT count(*)::int AS n FROM ledger')).rows[0]!.n as number;
      const counters = (await c.query('SELECT count(*)::int AS n FROM counters')).rows[0]!.n as number;
      const rows = (
        await c.query(`
          WITH expected AS (
            SELECT token_id, module_id, period, win, sum(units) AS units FROM (
              SELECT token_id, module_id, p.period, p.win, CASE kind WHEN 'charge' THEN units ELSE -units END AS units
              FROM ledger, LATERAL (VALUES ('day', day), ('month', month), ('never', 'all')) AS p(period, win)
              UNION ALL
              SELECT token_id, module_id, period, win, units FROM ledger_pruned) AS all_units
            GROUP BY token_id, module_id, period, win)
          SELECT coalesce(c.token_id, e.token_id) AS t, coalesce(c.module_id, e.module_id) AS m, coalesce(c.period, e.period) AS p,
                 coalesce(c.win, e.win) AS w, coalesce(c.used, 0) AS counter, coalesce(e.units, 0)::bigint AS ledger
          FROM counters c FULL JOIN expected e USING (token_id, module_id, period, win)
          WHERE coalesce(c.used, 0) <> coalesce(e.units, 0)`)
      ).rows;
      const mismatches = rows.map((r) => ({ key: [r.t, r.m, r.p, r.w], counter: r.counter as number, ledger: r.ledger as number }));
      return { ok: mismatches.length === 0, entries, counters, mismatches };
    });
  }

  async writeAudit(record: AuditRecord) {
    await this.q('INSERT INTO audit (at_ms, request_id, record) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [Date.parse(record.at), record.request_id, record]);
  }
  async getResults(requestId: string): Promise<StoredResults | undefined> {
    const r = await this.pool.query<{ record: StoredResults }>('SELECT record FROM results WHERE request_id = $1', [requestId]);
    return r.rows[0]?.record;
  }

  async listAudit(q: PageQuery, where?: (r: AuditRecord) => boolean): Promise<Page<AuditRecord>> {
    if (!where) return this.page('audit', q, (r) => r.record as AuditRecord, 'request_id');
    // filters are predicates shared with LMDB: scan pages until this one is full, bounded
    // like the LMDB scan (AUDIT_SCAN_BUDGET), and answer a cursor at the last row examined
    const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
    const items: AuditRecord[] = [];
    let cursor = q.cursor;
    for (let scanned = 0; scanned < AUDIT_SCAN_BUDGET; ) {
      const page = await this.page('audit', { ...q, cursor, limit: 1000 }, (r) => r.record as AuditRecord, 'request_id');
      for (const r of page.items) {
        scanned++;
        if (!where(r)) continue;
        items.push(r);
        if (items.length === limit) return { items, next_cursor: cursorOf(Date.parse(r.at), r.request_id) };
      }
      if (!page.next_cursor) return { items, next_cursor: null };
      cursor = page.next_cursor;
    }
    return { items, next_cursor: cursor ?? null };
  }

  // Token and user search read every record and page in JS with the same order and
  // cursor as LMDB; correct, but O(tokens) per page (an indexed SQL query is still to do).
  async searchTokens(query: SearchQuery): Promise<SearchPage<TokenRecord>> {
    const needle = query.q === undefined ? undefined : tokenNameKey(query.q);
    const key = (t: TokenRecord): [string, string] => [tokenNameKey(t.name), t.id];
    const rows = (await this.listTokens())
      .filter((t) => needle === undefined || tokenNameKey(t.name).includes(needle) || t.token_prefix.startsWith(query.q!) || t.id.startsWith(query.q!))
      .map((t) => ({ t, k: key(t) }))
      .sort((a, b) => cmpPair(a.k, b.k))
      .filter((r) => !query.after || cmpPair(r.k, query.after) > 0);
    const items = rows.slice(0, query.limit).map((r) => r.t);
    return { items, next: rows.length > query.limit ? key(items[items.length - 1]!) : null };
  }
  async searchUsers(query: SearchQuery): Promise<SearchPage<UserRecord>> {
    const needle = query.q?.toLowerCase();
    const rows = (await this.listUsers())
      .filter((u) => needle === undefined || u.username.toLowerCase().includes(needle) || u.id.startsWith(query.q!))
      .sort((a, b) => (a.username < b.username ? -1 : a.username > b.username ? 1 : 0))
      .filter((u) => !query.after || u.username > query.after[0]);
    const items = rows.slice(0, query.limit);
    const last = items[items.length - 1];
    return { items, next: rows.length > query.limit && last ? [last.username, last.id] : null };
  }
  async dailyTotals(q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }): Promise<DailyTotal[]> {
    // the ledger's day column is the window that took the units, so a refund lands on the
    // day of its charge
    const values: unknown[] = [q.fromDay, q.toDay];
    const where = ['day >= $1', 'day <= $2'];
    if (q.token_id !== undefined) where.push(`token_id = $${values.push(q.token_id)}`);
    if (q.module_id !== undefined) where.push(`module_id = $${values.push(q.module_id)}`);
    const rows = (
      await this.q(
        `SELECT day, sum(CASE kind WHEN 'charge' THEN units ELSE 0 END)::bigint AS c, sum(CASE kind WHEN 'refund' THEN units ELSE 0 END)::bigint AS r
         FROM ledger WHERE ${where.join(' AND ')} GROUP BY day`,
        values,
      )
    ).rows;
    const sums = new Map(rows.map((r) => [r.day as string, [Number(r.c), Number(r.r)] as const]));
    return dayTotals(q.fromDay, q.toDay, sums);
  }
  async ensureConsoleIndexes() {
    // nothing derived to build: SQL answers these from the tables themselves
  }

  async pruneIdempotency(at: number, retentionHours: number) {
    const cutoff = at - retentionHours * 3600_000;
    const r = await this.q(
      `WITH k AS (DELETE FROM idempotency WHERE state = 'completed' AND completed_ms < $1 RETURNING 1),
            r AS (DELETE FROM reservations WHERE state IN ('charged', 'refunded') AND settled_ms < $1 RETURNING 1)
       SELECT (SELECT count(*) FROM k)::int AS n, (SELECT count(*) FROM r)::int AS m`,
      [cutoff],
    );
    return r.rows[0]!.n as number;
  }

  async recoverPending(at: number) {
    const swept = (await this.q('SELECT * FROM lv_sweep_expired($1, $2)', [at, isoOf(at)])).rows.map(reservationOf);
    // nodes long dead that hold nothing any more (CLI runs, crashed processes) are forgotten
    await this.q(`DELETE FROM nodes n WHERE n.lease_until < now() - interval '1 hour' AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`);
    return swept;
  }

  // sessions

  async putSession(key: string, session: SessionRecord) {
    await this.q('INSERT INTO sessions (key, user_id, record) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record', [key, session.user_id, session]);
  }
  async getSession(key: string) {
    return (await this.q('SELECT record FROM sessions WHERE key = $1', [key])).rows[0]?.record as SessionRecord | undefined;
  }
  async deleteSession(key: string) {
    await this.q('DELETE FROM sessions WHERE key = $1', [key]);
  }
  async deleteUserSessions(userId: string, keep?: string) {
    return (await this.q('DELETE FROM sessions WHERE user_id = $1 AND key IS DISTINCT FROM $2', [userId, keep ?? null])).rowCount ?? 0;
  }
  async sweepSessions(alive: (s: SessionRecord) => boolean) {
    const dead = (await this.q('SELECT key, record FROM sessions')).rows.filter((r) => !alive(r.record as SessionRecord)).map((r) => r.key as string);
    if (dead.length > 0) await this.q('DELETE FROM sessions WHERE key = ANY($1)', [dead]);
  }

  // login throttle: the counts are shared by every node, so N nodes never allow N times the attempts

  async readThrottle(address: string, username: string, at: number): Promise<ThrottleView> {
    const rows = (
      await this.q(
        `SELECT key, count, window_start, last_failure, NULL::bigint AS known FROM login_throttle WHERE key = ANY($1)
         UNION ALL SELECT 'known', 0, 0, 0, at_ms FROM login_known WHERE name = $2 AND address = $3`,
        [[addressKey(address), pairKey(address, username), nameKey(username)], throttleName(username), address],
      )
    ).rows;
    const get = (k: string) => {
      const r = rows.find((x) => x.key === k);
      // count 0: a row made by a refused attempt's lock, or given back by a success: no count
      return r && r.count > 0 ? ({ count: r.count, window_start: r.window_start, last_failure: r.last_failure } as FailureCount) : undefined;
    };
    const known = rows.find((x) => x.key === 'known');
    return { address: get(addressKey(address)), pair: get(pairKey(address, username)), name: get(nameKey(username)), known: known !== undefined && at - (known.known as number) < KNOWN_ADDRESS_MS };
  }

  async reserveLoginAttempt(address: string, username: string, at: number): Promise<AttemptReservation> {
    // the same transaction as a failure, deciding under the row locks: concurrent attempts
    // (on any node) queue on the three rows, so each sees the counts of those before it
    return this.tx(async (c) => {
      const counts = await this.lockThrottleRows(c, address, username);
      const known = (await c.query('SELECT at_ms FROM login_known WHERE name = $1 AND address = $2', [throttleName(username), address])).rows[0];
      const view: ThrottleView = {
        address: counts.get(addressKey(address)),
        pair: counts.get(pairKey(address, username)),
        name: counts.get(nameKey(username)),
        known: known !== undefined && at - (known.at_ms as number) < KNOWN_ADDRESS_MS,
      };
      const wait = throttleWait(view, at);
      if (wait === 0) await this.countOneFailure(c, counts, address, username, at);
      return { wait, known: view.known };
    });
  }

  async releaseLoginAttempt(address: string, username: string, reservedAt: number) {
    const keys = [addressKey(address), pairKey(address, username), nameKey(username)];
    // a count given back to 0 stays as a row with count 0, which reads as no count
    await this.tx(async (c) => {
      await this.lockOrdered(c, keys);
      await c.query('UPDATE login_throttle SET count = count - 1 WHERE key = ANY($1) AND count > 0 AND window_start <= $2', [keys, reservedAt]);
    });
  }

  async recordLoginFailure(address: string, username: string, at: number) {
    await this.tx(async (c) => this.countOneFailure(c, await this.lockThrottleRows(c, address, username), address, username, at));
  }

  /** The address, pair and name rows, made first and locked in key order, so concurrent
   * attempts count one by one; a row with count 0 is one just made (no count). */
  private async lockThrottleRows(c: pg.PoolClient, address: string, username: string): Promise<Map<string, FailureCount>> {
    const keys = [addressKey(address), pairKey(address, username), nameKey(username)];
    await c.query(`INSERT INTO login_throttle (key, count, window_start, last_failure) SELECT k, 0, 0, 0 FROM unnest($1::text[]) k ORDER BY k ON CONFLICT DO NOTHING`, [keys]);
    const rows = (await c.query('SELECT key, count, window_start, last_failure FROM login_throttle WHERE key = ANY($1) ORDER BY key FOR UPDATE', [keys])).rows;
    return new Map(rows.filter((r) => r.count > 0).map((r) => [r.key as string, { count: r.count, window_start: r.window_start, last_failure: r.last_failure } as FailureCount]));
  }

  private async countOneFailure(c: pg.PoolClient, counts: Map<string, FailureCount>, address: string, username: string, at: number): Promise<void> {
    for (const [k, live] of [
      [addressKey(address), windowLive],
      [pairKey(address, username), windowLive],
      [nameKey(username), nameLive],
    ] as const) {
      const f = counts.get(k);
      const next = countFailure(f, live(f, at), at);
      await c.query('UPDATE login_throttle SET count = $2, window_start = $3, last_failure = $4 WHERE key = $1', [k, next.count, next.window_start, next.last_failure]);
    }
  }

  async recordLoginSuccess(address: string, username: string, at: number, success: AttemptSuccess = {}) {
    // the pair and name cleared, the address known, and the address count less this
    // attempt's reservation unless its window started after it (login-throttle.ts); the rows
    // are locked in key order first, as every throttle write does, so that a success and
    // concurrent attempts queue instead of deadlocking
    await this.tx(async (c) => {
      await this.lockOrdered(c, [addressKey(address), pairKey(address, username), nameKey(username)]);
      await c.query('DELETE FROM login_throttle WHERE key = ANY($1)', [[pairKey(address, username), nameKey(username)]]);
      if (success.reservedAt !== undefined) {
        await c.query('UPDATE login_throttle SET count = count - 1 WHERE key = $1 AND count > 0 AND window_start <= $2', [addressKey(address), success.reservedAt]);
      }
      await c.query(
        'INSERT INTO login_known (name, address, at_ms) VALUES ($1, $2, $3) ON CONFLICT (name, address) DO UPDATE SET at_ms = EXCLUDED.at_ms',
        [throttleName(username), address, at],
      );
    });
  }

  /** Locks the existing rows of `keys` in key order (the order every throttle write uses). */
  private async lockOrdered(c: pg.PoolClient, keys: string[]): Promise<void> {
    await c.query('SELECT key FROM login_throttle WHERE key = ANY($1) ORDER BY key FOR UPDATE', [keys]);
  }

  async sweepLoginThrottle(at: number) {
    const rows = (await this.q('SELECT key, count, window_start, last_failure FROM login_throttle')).rows;
    const stale = rows.filter((r) => (String(r.key).startsWith('user:') ? !nameLive(r as FailureCount, at) : !windowLive(r as FailureCount, at))).map((r) => r.key as string);
    if (stale.length > 0) await this.q('DELETE FROM login_throttle WHERE key = ANY($1)', [stale]);
    await this.q('DELETE FROM login_known WHERE at_ms <= $1', [at - KNOWN_ADDRESS_MS]);
  }

  // device sessions (pg/device-sessions.ts)
  private readonly sessionQuery: deviceSessions.Query = (text, values, name) => this.q(text, values, name);
  createDeviceSession(session: DeviceSession, limit: MintLimit, at: number) {
    return deviceSessions.createDeviceSession(this.sessionQuery, session, limit, at);
  }
  getDeviceSession(id: string) {
    return deviceSessions.getDeviceSession(this.sessionQuery, id);
  }
  getDeviceSessionByHash(hash: string) {
    return deviceSessions.getDeviceSessionByHash(this.sessionQuery, hash);
  }
  revokeDeviceSession(id: string, at: number) {
    return deviceSessions.revokeDeviceSession(this.sessionQuery, id, at);
  }
  listDeviceSessionCalls(id: string) {
    return deviceSessions.listDeviceSessionCalls(this.sessionQuery, id);
  }
  listActiveDeviceSessions(tokenId: string, at: number) {
    return deviceSessions.listActiveDeviceSessions(this.sessionQuery, tokenId, at);
  }
  pruneDeviceSessionsBefore(cutoff: number) {
    return deviceSessions.pruneDeviceSessionsBefore(this.sessionQuery, cutoff);
  }

  async listSigningKeys(): Promise<KeyFile[]> {
    return (await this.q('SELECT kid, created_at, retired_at, revoked_at, revoked_by, jwk FROM signing_keys ORDER BY seq')).rows.map(keyOf);
  }

  async createFirstSigningKey(candidate: KeyFile): Promise<KeyFile> {
    // the partial unique index admits one unretired row: a racing insert waits for the
    // winner's commit and then does nothing, so the SELECT below sees the winner
    await this.q(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [candidate.kid, candidate.created_at, JSON.stringify(candidate.jwk)]);
    const row = (await this.q('SELECT kid, created_at, retired_at, jwk FROM signing_keys WHERE retired_at IS NULL')).rows[0];
    if (!row) throw new Error('no current signing key after insert');
    return keyOf(row);
  }

  async rotateSigningKey(next: KeyFile, at: number, deleteRetiredBefore: number) {
    return this.tx(async (c) => {
      // rotations from two CLIs queue here instead of both retiring the same key
      await c.query(`SELECT pg_advisory_xact_lock(hashtext('lv_signing_keys'))`);
      const old = (await c.query(`UPDATE signing_keys SET retired_at = $1, retired_ms = $2 WHERE retired_at IS NULL RETURNING kid`, [new Date(at).toISOString(), at])).rows[0];
      await c.query(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3)`, [next.kid, next.created_at, JSON.stringify(next.jwk)]);
      const deleted = (await c.query(`DELETE FROM signing_keys WHERE retired_ms <= $1 RETURNING kid`, [deleteRetiredBefore])).rows.map((r) => r.kid as string);
      return { kid: next.kid, retired: (old?.kid as string | undefined) ?? null, deleted };
    });
  }

  async revokeSigningKey(kid: string, next: KeyFile, at: number, by: string): Promise<KeyRevocation | null> {
    return this.tx(async (c) => {
      // queued behind (or ahead of) a rotation, so the two never both replace the current key
      await c.query(`SELECT pg_advisory_xact_lock(hashtext('lv_signing_keys'))`);
      const row = (await c.query('SELECT retired_at, revoked_at, revoked_by FROM signing_keys WHERE kid = $1', [kid])).rows[0];
      if (!row) return null;
      const currentKid = async () => ((await c.query('SELECT kid FROM signing_keys WHERE retired_at IS NULL')).rows[0]?.kid as string | undefined) ?? null;
      if (row.revoked_at !== null) return { kid, revoked_at: row.revoked_at as string, revoked_by: (row.revoked_by as string | null) ?? null, current: await currentKid(), already_revoked: true };
      const iso = new Date(at).toISOString();
      // `jwk - 'd'` drops the private part; retired_ms NULL keeps the row (the record of the
      // revocation) out of the 30-day deletion of retired keys
      await c.query(`UPDATE signing_keys SET retired_at = COALESCE(retired_at, $2), retired_ms = NULL, revoked_at = $2, revoked_by = $3, jwk = jwk - 'd' WHERE kid = $1`, [kid, iso, by]);
      if (row.retired_at === null) await c.query(`INSERT INTO signing_keys (kid, created_at, jwk) VALUES ($1, $2, $3)`, [next.kid, next.created_at, JSON.stringify(next.jwk)]);
      return { kid, revoked_at: iso, revoked_by: by, current: await currentKid(), already_revoked: false };
    });
  }
}

function keyOf(r: Row): KeyFile {
  const revoked = r.revoked_at ? { revoked_at: r.revoked_at as string, revoked_by: (r.revoked_by as string | null) ?? null } : {};
  return { kid: r.kid as string, created_at: r.created_at as string, retired_at: (r.retired_at as string | null) ?? null, ...revoked, jwk: (typeof r.jwk === 'string' ? JSON.parse(r.jwk) : r.jwk) as JWK };
}

/** Connection-level failures (refused, reset, terminated, timed out, server shutting down)
 * become StoreUnavailableError; anything else (a constraint, a rule thrown by a check
 * callback) stays as it is, since retrying will not help. */
function unavailable(err: unknown): unknown {
  if (err instanceof ServiceError) return err;
  const e = err as { code?: unknown; message?: unknown; severity?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  const connection =
    /^E[A-Z]+$/.test(code) || // ECONNREFUSED, ECONNRESET, EPIPE, ...
    /^(08|57P|53)/.test(code) || // SQLSTATE: connection exception, shutdown, resources
    code === '57014' || // statement_timeout
    /Connection terminated|Connection ended|connection error|timeout/i.test(message);
  return connection ? new StoreUnavailableError(`store unavailable: ${message || String(err)}`, err) : err;
}
