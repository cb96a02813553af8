import { migrate, serviceSchema } from './migrate.ts';
import { StoreError } from '../errors.ts';
import type { FaultHooks, SettlementFault } from '../faults.ts';
import { RefusalTally, type RowLost } from '../refusal-tally.ts';
import type { ModuleId } from '../../contract/index.ts';
import type { PageQuery, ReserveInput, ResolveAction, SearchQuery, StoreBackend, UserPatch } from '../backend.ts';
import type { AttemptSuccess } from '../throttle-rules.ts';
import type { AuditRecord, KeyFile, RenderAnswer, Reservation, SessionRecord, TokenRecord, UsageRecord, UserRecord } from '../records.ts';
import { leaseHeld, openPool, type Pg, type PgOptions } from './open.ts';
import { RecentSettlements, restoreLostCommits, type LostCommit } from './lost-commits.ts';
import { DatabaseUrlError, hostName, parseDatabaseUrl, type DatabaseTarget } from '../../config/index.ts';
import { healthy, register, renew } from './lease.ts';
import { createUser, getUser, getUserByName, listUsers, updateUser } from './users.ts';
import { getToken, getTokenByHash, insertToken, listTokens, updateToken } from './tokens.ts';
import { moduleEnabled, setModuleEnabled } from './modules.ts';
import { reserve } from './reserve.ts';
import { getReservation, listSettlementFailed, refund, resolveReservation, settle } from './settle.ts';
import { pruneIdempotency } from './idempotency.ts';
import { usageSnapshot } from './usage.ts';
import { listLedger, verifyLedger } from './ledger.ts';
import { listAudit, writeAudit, writeAuditCount } from './audit.ts';
import { getResults } from './results.ts';
import { searchTokens, searchUsers } from './search.ts';
import { dailyTotals } from './daily-totals.ts';
import { pruneAuditBefore, pruneLedgerBefore, pruneResultsBefore } from './retention.ts';
import { recoverPending, recoverThread } from './recovery.ts';
import { deleteSession, deleteUserSessions, getSession, putSession, sweepSessions, touchSession } from './sessions.ts';
import { readThrottle, recordLoginFailure, recordLoginSuccess, releaseLoginAttempt, reserveLoginAttempt, sweepLoginThrottle } from './login-throttle.ts';
import { createFirstSigningKey, deleteRetiredSigningKeys, listSigningKeys, revokeSigningKey, rotateSigningKey } from './keys.ts';
import * as deviceSessions from './device-sessions.ts';
import type { DeviceSession, MintLimit } from '../device-sessions.ts';

export { StoreUnavailableError } from '../errors.ts';
export { type PgOptions } from './open.ts';
// for `db migrate`'s answer (src/cli/db.ts): the schema version this build migrates to
export { MIGRATIONS } from './migrations.ts';

/** The shared store for several nodes: every operation is one statement, one stored
 * function call, or (operator paths only) one short transaction. Each job is written in its
 * own file of store/pg/, named as its counterpart in store/lmdb/ (reserve.ts, settle.ts,
 * idempotency.ts, ledger.ts, login-throttle.ts ...), so this class only opens, keeps the
 * lease running, and delegates. */
export class PgBackend implements StoreBackend, FaultHooks {
  readonly kind = 'postgres' as const;
  settlementFault: SettlementFault | null = null;
  /** migrations this process applied when it opened the store (npm run cli -- db migrate) */
  applied: number[] = [];
  private renewTimer: NodeJS.Timeout | undefined;
  /** this thread's calls in flight and recent answers, for commits a failover lost (lost-commits.ts) */
  readonly recent = new RecentSettlements();

  private constructor(private readonly db: Pg) {}

  /** Connects, applies pending migrations (under an advisory lock) and registers this
   * process as a node with a lease it keeps renewing. */
  static async open(url: string, opts: PgOptions = {}): Promise<PgBackend> {
    let target: DatabaseTarget;
    try {
      target = parseDatabaseUrl(url);
    } catch (err) {
      // loadConfig refuses such a URL first; a caller passing one directly gets the same
      // reason, and never the URL itself (it holds the password)
      if (err instanceof DatabaseUrlError) throw new StoreError(`DATABASE_URL ${err.message}`);
      throw err;
    }
    let b: PgBackend | undefined;
    const db = openPool(target, {
      ...opts,
      // the outage's end is also the moment to renew the lease and make the writes owed
      // (an unknown settlement's resolution among them) rather than wait for the timer
      onRecovered: (info) => {
        opts.onRecovered?.(info);
        void b?.renew().then(() => b?.restoreLostCommits()).then((lost) => {
          for (const l of lost ?? []) opts.onLostCommit?.(l);
        }, (err: Error) => opts.onError?.(err));
      },
    });
    b = new PgBackend(db);
    const hosts = target.hosts.map(hostName).join(',');
    let absent: string | null = null;
    try {
      // checked before the migration, which would create the schema (and the node row after
      // it): a mistyped database name, or one the service never set up, answered as an empty store
      const schema = opts.existing ? await serviceSchema(b.pool) : null;
      if (schema && !schema.present) absent = schema.database;
      else {
        b.applied = await migrate(b.pool);
        await register(b.db);
      }
    } catch (err) {
      await b.pool.end().catch(() => {});
      throw new StoreError(`cannot open the PostgreSQL store at ${hosts}/${target.database ?? ''}: ${(err as Error).message}`, { cause: err });
    }
    if (absent !== null) {
      await b.pool.end().catch(() => {});
      throw new StoreError(`no store in PostgreSQL database ${JSON.stringify(absent)} at ${hosts}: is DATABASE_URL right? (it has none of this service's tables; nothing was created)`);
    }
    b.renewTimer = setInterval(() => void b.renew(), Math.max(50, Math.floor(b.db.leaseMs / 3)));
    b.renewTimer.unref();
    return b;
  }

  get pool() {
    return this.db.pool;
  }
  get writes() {
    return this.db.writes;
  }
  get node(): string {
    return this.db.node;
  }
  renew() {
    return renew(this.db);
  }
  /** writes still owed to the database (see Pg.repairs) */
  pendingRepairs(): number {
    return this.db.repairs.size;
  }
  healthy() {
    return healthy(this.db);
  }
  unavailableReason(): { reason: string; detail: string } | null {
    const outage = this.db.hosts.outage;
    if (outage) {
      const since = new Date(outage.since).toISOString();
      return { reason: `no writable database host since ${since}`, detail: `since ${since}: ${outage.latest}` };
    }
    if (!leaseHeld(this.db)) {
      // the renewal is a moment of the monotonic clock; a person reads it as a date, taken as
      // that long before the wall clock's now (a clock stepped since moves the date, not the lapse)
      const renewed = Date.now() - (performance.now() - (this.db.leaseOkUntil - this.db.leaseMs));
      const reason = `this node's lease was not renewed since ${new Date(renewed).toISOString()}`;
      return { reason, detail: reason };
    }
    return null;
  }

  async close(): Promise<void> {
    // the counted refusals first, while the pool still answers
    await this.refusals.close().catch(() => {});
    clearInterval(this.renewTimer);
    this.db.hosts.close();
    this.db.writes.close();
    // a node that leaves cleanly and holds nothing is forgotten at once
    await this.db.pool.query(`DELETE FROM nodes n WHERE n.id = $1 AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`, [this.db.node]).catch(() => {});
    await this.db.pool.end();
  }

  getUser(id: string) {
    return getUser(this.db, id);
  }
  getUserByName(username: string) {
    return getUserByName(this.db, username);
  }
  listUsers() {
    return listUsers(this.db);
  }
  createUser(user: UserRecord) {
    return createUser(this.db, user);
  }
  updateUser(id: string, patch: UserPatch, check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void) {
    return updateUser(this.db, id, patch, check);
  }
  getToken(id: string) {
    return getToken(this.db, id);
  }
  getTokenByHash(hash: string) {
    return getTokenByHash(this.db, hash);
  }
  listTokens() {
    return listTokens(this.db);
  }
  insertToken(token: TokenRecord) {
    return insertToken(this.db, token);
  }
  updateToken(id: string, change: (t: TokenRecord) => TokenRecord) {
    return updateToken(this.db, id, change);
  }
  moduleEnabled(id: ModuleId) {
    return moduleEnabled(this.db, id);
  }
  setModuleEnabled(id: ModuleId, enabled: boolean) {
    return setModuleEnabled(this.db, id, enabled);
  }

  async reserve(input: ReserveInput) {
    const out = await reserve(this.db, input);
    if (out.kind === 'reserved') this.recent.held.add(out.reservation.id);
    return out;
  }
  async settle(reservation: Reservation, at: number, render: RenderAnswer, results: unknown) {
    try {
      const out = await settle(this.db, reservation, at, render, results, this.settlementFault?.(results) ?? null, renew);
      if (out.kind === 'settled') this.recent.remember(reservation, at, out.body, results);
      return out;
    } finally {
      this.recent.held.delete(reservation.id);
    }
  }
  async refund(reservationId: string, at: number) {
    try {
      return await refund(this.db, reservationId, at);
    } finally {
      this.recent.held.delete(reservationId);
    }
  }
  /** after an outage: settlements answered whose commit the database lacks (lost-commits.ts) */
  restoreLostCommits(recheckMs?: number): Promise<LostCommit[]> {
    return restoreLostCommits(this.db, this.recent, recheckMs);
  }
  resolveReservation(id: string, action: ResolveAction, at: number) {
    return resolveReservation(this.db, id, action, at);
  }
  getReservation(id: string) {
    return getReservation(this.db, id);
  }
  listSettlementFailed() {
    return listSettlementFailed(this.db);
  }
  usageSnapshot(token: TokenRecord, at: number) {
    return usageSnapshot(this.db, token, at);
  }
  listLedger(q: PageQuery) {
    return listLedger(this.db, q);
  }
  verifyLedger() {
    return verifyLedger(this.db);
  }
  /** refused calls counted per minute (refusal-tally.ts), each row one unsynced INSERT */
  private readonly refusals = new RefusalTally((row, again) => writeAuditCount(this.db, row, again));
  async writeAudit(record: AuditRecord, counted?: RowLost) {
    if (counted) {
      this.refusals.add(record, counted);
      return;
    }
    return writeAudit(this.db, record);
  }
  listAudit(q: PageQuery, where?: (r: AuditRecord) => boolean) {
    return listAudit(this.db, q, where);
  }
  getResults(requestId: string) {
    return getResults(this.db, requestId);
  }
  searchTokens(query: SearchQuery) {
    return searchTokens(this.db, query);
  }
  searchUsers(query: SearchQuery) {
    return searchUsers(this.db, query);
  }
  dailyTotals(q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }) {
    return dailyTotals(this.db, q);
  }
  async ensureConsoleIndexes() {
    // nothing derived to build: SQL answers these from the tables themselves
  }
  pruneIdempotency(at: number, retentionHours: number) {
    return pruneIdempotency(this.db, at, retentionHours);
  }
  pruneAuditBefore(cutoff: number) {
    return pruneAuditBefore(this.db, cutoff);
  }
  pruneResultsBefore(cutoff: number) {
    return pruneResultsBefore(this.db, cutoff);
  }
  pruneLedgerBefore(cutoff: number) {
    return pruneLedgerBefore(this.db, cutoff);
  }
  recoverPending(at: number) {
    return recoverPending(this.db, at);
  }
  recoverThread(thread: number, at: number) {
    return recoverThread(this.db, thread, at);
  }

  putSession(key: string, session: SessionRecord) {
    return putSession(this.db, key, session);
  }
  getSession(key: string) {
    return getSession(this.db, key);
  }
  touchSession(key: string, lastSeen: number) {
    return touchSession(this.db, key, lastSeen);
  }
  deleteSession(key: string) {
    return deleteSession(this.db, key);
  }
  deleteUserSessions(userId: string, keep?: string) {
    return deleteUserSessions(this.db, userId, keep);
  }
  sweepSessions(alive: (s: SessionRecord) => boolean) {
    return sweepSessions(this.db, alive);
  }

  readThrottle(address: string, username: string, at: number) {
    return readThrottle(this.db, address, username, at);
  }
  reserveLoginAttempt(address: string, username: string, at: number) {
    return reserveLoginAttempt(this.db, address, username, at);
  }
  releaseLoginAttempt(address: string, username: string, reservedAt: number) {
    return releaseLoginAttempt(this.db, address, username, reservedAt);
  }
  recordLoginFailure(address: string, username: string, at: number) {
    return recordLoginFailure(this.db, address, username, at);
  }
  recordLoginSuccess(address: string, username: string, at: number, success?: AttemptSuccess) {
    return recordLoginSuccess(this.db, address, username, at, success);
  }
  sweepLoginThrottle(at: number) {
    return sweepLoginThrottle(this.db, at);
  }

  createDeviceSession(session: DeviceSession, limit: MintLimit, at: number) {
    return deviceSessions.createDeviceSession(this.db, session, limit, at);
  }
  getDeviceSession(id: string) {
    return deviceSessions.getDeviceSession(this.db, id);
  }
  getDeviceSessionByHash(hash: string) {
    return deviceSessions.getDeviceSessionByHash(this.db, hash);
  }
  revokeDeviceSession(id: string, at: number) {
    return deviceSessions.revokeDeviceSession(this.db, id, at);
  }
  listDeviceSessionCalls(id: string) {
    return deviceSessions.listDeviceSessionCalls(this.db, id);
  }
  listActiveDeviceSessions(tokenId: string, at: number) {
    return deviceSessions.listActiveDeviceSessions(this.db, tokenId, at);
  }
  pruneDeviceSessionsBefore(cutoff: number) {
    return deviceSessions.pruneDeviceSessionsBefore(this.db, cutoff);
  }

  listSigningKeys() {
    return listSigningKeys(this.db);
  }
  createFirstSigningKey(candidate: KeyFile) {
    return createFirstSigningKey(this.db, candidate);
  }
  rotateSigningKey(next: KeyFile, at: number, deleteRetiredBefore: number) {
    return rotateSigningKey(this.db, next, at, deleteRetiredBefore);
  }
  revokeSigningKey(kid: string, next: KeyFile, at: number, by: string) {
    return revokeSigningKey(this.db, kid, next, at, by);
  }
  deleteRetiredSigningKeys(retiredBefore: number) {
    return deleteRetiredSigningKeys(this.db, retiredBefore);
  }
}
