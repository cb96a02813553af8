import type { MessagePort } from 'node:worker_threads';
import { closeMeteringWriter, drainedByWriter, meteringWriterOf } from './writer.ts';
import { readThrottle, recordLoginFailure, recordLoginSuccess, releaseLoginAttempt, reserveLoginAttempt, sweepFailures } from './login-throttle.ts';
import type { AttemptSuccess } from '../throttle-rules.ts';
import { listAudit, writeAudit } from './audit.ts';
import { ledgerCounterDeltas, listLedger, verifyLedger } from './ledger.ts';
import { pruneIdempotency } from './idempotency.ts';
import { forgetExpiryIndex } from './expiry.ts';
import { recoverPending, recoverThread } from './recovery.ts';
import { reserve } from './reserve.ts';
import { getReservation, listSettlementFailed, refund, resolveReservation, settle } from './settle.ts';
import { getResults } from './results.ts';
import { usageSnapshot } from './usage.ts';
import type { ModuleId } from '../../contract/index.ts';
import type { SearchQuery, StoreBackend, UserPatch } from '../backend.ts';
import type { FaultHooks, SettlementFault } from '../faults.ts';
import { RefusalTally, type RowLost } from '../refusal-tally.ts';
import { moduleEnabled, setModuleEnabled } from './modules.ts';
import { openStore, readLatest, storeHealthy, type LmdbCommits, type Store } from './open.ts';
import { pruneAuditBefore, pruneLedgerBefore, pruneResultsBefore } from './retention.ts';
import type { SessionRecord, TokenRecord, UserRecord } from '../records.ts';
import { searchTokens, searchUsers } from './search.ts';
import { deleteSession, deleteUserSessions, getSession, putSession, sweepSessions, touchSession } from './sessions.ts';
import { createFirstSigningKey, deleteRetiredSigningKeys, listSigningKeys, revokeSigningKey, rotateSigningKey } from './keys.ts';
import { ensureTokenNameIndex } from './token-names.ts';
import { dailyTotals, ensureDailyTotals } from './daily-totals.ts';
import { ensureByTokenIndex } from './by-token.ts';
import { getToken, getTokenByHash, insertToken, listTokens, updateToken } from './tokens.ts';
import { getUser, getUserByName, insertUser, listUsers, updateUser } from './users.ts';
import * as deviceSessions from './device-sessions.ts';
import type { DeviceSession, MintLimit } from '../device-sessions.ts';

/** The embedded store behind the common interface. Each job is written in its own file of
 * store/lmdb/, named as its counterpart in store/pg/ (reserve.ts, settle.ts, idempotency.ts,
 * ledger.ts, login-throttle.ts ...), so this is a thin adapter: each call is one LMDB write
 * transaction (atomic.ts) or a read from the latest commit. */
export class LmdbBackend implements StoreBackend, FaultHooks {
  readonly kind = 'lmdb' as const;
  settlementFault: SettlementFault | null = null;
  constructor(readonly store: Store) {}

  static open(dataDir: string, opts: Parameters<typeof openStore>[1] = {}): LmdbBackend {
    return new LmdbBackend(openStore(dataDir, opts));
  }

  async healthy() {
    return storeHealthy(this.store);
  }
  sizes() {
    // the environment's info and the main tree's stat: a few fields, no tree walked
    const s = this.store.root.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
    return { usedBytes: (s.lastPageNumber + 1) * s.pageSize, mapBytes: s.mapSize };
  }
  get writes() {
    return this.store.writes;
  }
  async close() {
    // the counted refusals first: their rows go through the audit queue the store's close writes
    await this.refusals.close();
    // the main thread's metering writer, once the API workers that used it have stopped
    await closeMeteringWriter(this.store);
    return this.store.close();
  }

  async getUser(id: string) {
    return getUser(this.store, id);
  }
  async getUserByName(username: string) {
    return getUserByName(this.store, username);
  }
  async listUsers() {
    return listUsers(this.store);
  }
  createUser(user: UserRecord) {
    return insertUser(this.store, user);
  }
  updateUser(id: string, patch: UserPatch, check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void) {
    return updateUser(this.store, id, patch, check);
  }
  async getToken(id: string) {
    return getToken(this.store, id);
  }
  async getTokenByHash(hash: string) {
    return getTokenByHash(this.store, hash);
  }
  async listTokens() {
    return listTokens(this.store);
  }
  insertToken(token: TokenRecord) {
    return insertToken(this.store, token);
  }
  updateToken(id: string, change: (t: TokenRecord) => TokenRecord) {
    return updateToken(this.store, id, change);
  }
  async moduleEnabled(id: ModuleId) {
    readLatest(this.store);
    return moduleEnabled(this.store, id);
  }
  setModuleEnabled(id: ModuleId, enabled: boolean) {
    return setModuleEnabled(this.store, id, enabled);
  }

  reserve(input: Parameters<StoreBackend['reserve']>[0]) {
    return reserve(this.store, input);
  }
  settle(...args: Parameters<StoreBackend['settle']>) {
    return settle(this.store, ...args, this.settlementFault?.(args[3]) ?? null);
  }
  refund(reservationId: string, at: number) {
    return refund(this.store, reservationId, at);
  }
  resolveReservation(id: string, action: 'charge' | 'refund', at: number) {
    return resolveReservation(this.store, id, action, at);
  }
  async getReservation(id: string) {
    return getReservation(this.store, id);
  }
  async listSettlementFailed() {
    return listSettlementFailed(this.store);
  }
  async usageSnapshot(token: TokenRecord, at: number) {
    return usageSnapshot(this.store, token, at);
  }
  async listLedger(q: Parameters<StoreBackend['listLedger']>[0]) {
    readLatest(this.store);
    return listLedger(this.store, q);
  }
  async verifyLedger() {
    return verifyLedger(this.store);
  }
  /** refused calls counted per minute (refusal-tally.ts), written through the audit queue (a
   * row written again is a put on the same key: it replaces the first, in queue order) */
  private readonly refusals = new RefusalTally((row) => writeAudit(this.store, row));
  async writeAudit(record: Parameters<StoreBackend['writeAudit']>[0], counted?: RowLost) {
    if (counted) {
      this.refusals.add(record, counted);
      return;
    }
    await writeAudit(this.store, record);
  }
  async listAudit(q: Parameters<StoreBackend['listAudit']>[0], where?: Parameters<StoreBackend['listAudit']>[1]) {
    readLatest(this.store);
    return listAudit(this.store, q, where);
  }
  async getResults(requestId: string) {
    return getResults(this.store, requestId);
  }
  async searchTokens(q: SearchQuery) {
    readLatest(this.store);
    return searchTokens(this.store, q);
  }
  async searchUsers(q: SearchQuery) {
    readLatest(this.store);
    return searchUsers(this.store, q);
  }
  async dailyTotals(q: Parameters<StoreBackend['dailyTotals']>[0]) {
    readLatest(this.store);
    return dailyTotals(this.store, q);
  }
  /** `db migrate`: the next pass of each pruner indexes its tree again (expiry.ts) */
  forgetExpiryIndex() {
    return forgetExpiryIndex(this.store);
  }
  async ensureConsoleIndexes() {
    await ensureTokenNameIndex(this.store);
    await ensureDailyTotals(this.store);
    await ensureByTokenIndex(this.store);
  }
  pruneIdempotency(at: number, retentionHours: number) {
    return pruneIdempotency(this.store, at, retentionHours);
  }
  pruneAuditBefore(cutoff: number) {
    return pruneAuditBefore(this.store, cutoff);
  }
  pruneResultsBefore(cutoff: number) {
    return pruneResultsBefore(this.store, cutoff);
  }
  pruneLedgerBefore(cutoff: number) {
    return pruneLedgerBefore(this.store, cutoff, ledgerCounterDeltas);
  }
  recoverPending(at: number) {
    return recoverPending(this.store, at);
  }
  async recoverThread(thread: number, at: number) {
    // first what the process's metering writer committed for the dead worker and refunded
    // once it had run all of it (writer.ts), so that no reservation it committed after this
    // thread saw the exit escapes the scan; then the scan, for what the worker committed itself
    const byWriter = await drainedByWriter(this.store, thread);
    return [...byWriter, ...(await recoverThread(this.store, thread, at))];
  }

  putSession(key: string, session: SessionRecord) {
    return putSession(this.store, key, session);
  }
  async getSession(key: string) {
    return getSession(this.store, key);
  }
  touchSession(key: string, lastSeen: number) {
    return touchSession(this.store, key, lastSeen);
  }
  deleteSession(key: string) {
    return deleteSession(this.store, key);
  }
  deleteUserSessions(userId: string, keep?: string) {
    return deleteUserSessions(this.store, userId, keep);
  }
  sweepSessions(alive: (s: SessionRecord) => boolean) {
    return sweepSessions(this.store, alive);
  }

  async readThrottle(address: string, username: string, at: number) {
    return readThrottle(this.store, address, username, at);
  }
  reserveLoginAttempt(address: string, username: string, at: number) {
    return reserveLoginAttempt(this.store, address, username, at);
  }
  releaseLoginAttempt(address: string, username: string, reservedAt: number) {
    return releaseLoginAttempt(this.store, address, username, reservedAt);
  }
  recordLoginFailure(address: string, username: string, at: number) {
    return recordLoginFailure(this.store, address, username, at);
  }
  recordLoginSuccess(address: string, username: string, at: number, success?: AttemptSuccess) {
    return recordLoginSuccess(this.store, address, username, at, success);
  }
  sweepLoginThrottle(at: number) {
    return sweepFailures(this.store, at);
  }

  createDeviceSession(session: DeviceSession, limit: MintLimit, at: number) {
    return deviceSessions.createDeviceSession(this.store, session, limit, at);
  }
  async getDeviceSession(id: string) {
    return deviceSessions.getDeviceSession(this.store, id);
  }
  async getDeviceSessionByHash(hash: string) {
    return deviceSessions.getDeviceSessionByHash(this.store, hash);
  }
  revokeDeviceSession(id: string, at: number) {
    return deviceSessions.revokeDeviceSession(this.store, id, at);
  }
  async listDeviceSessionCalls(id: string) {
    return deviceSessions.listDeviceSessionCalls(this.store, id);
  }
  async listActiveDeviceSessions(tokenId: string, at: number) {
    return deviceSessions.listActiveDeviceSessions(this.store, tokenId, at);
  }
  pruneDeviceSessionsBefore(cutoff: number) {
    return deviceSessions.pruneDeviceSessionsBefore(this.store, cutoff);
  }

  listSigningKeys = listSigningKeys;
  createFirstSigningKey = createFirstSigningKey;
  rotateSigningKey = rotateSigningKey;
  revokeSigningKey = revokeSigningKey;
  deleteRetiredSigningKeys = deleteRetiredSigningKeys;
}

/** The LMDB environment behind a backend, or null on PostgreSQL: for the operations that are
 * LMDB's own (a file copy for backups, pruning of its tables) until they are store operations. */
export function embeddedStore(backend: StoreBackend): Store | null {
  return backend instanceof LmdbBackend ? backend.store : null;
}

/** An API worker's channel to the process's metering writer (writer.ts), started by the main
 * thread's store on first use; null when its commits are not `sync`. */
export function meteringWriterChannel(backend: LmdbBackend): { port: MessagePort; storeDir: string } | null {
  return meteringWriterOf(backend.store)?.connect() ?? null;
}
