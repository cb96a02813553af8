import type { ModuleId } from '../contract/index.ts';
import type { AuditRecord, DailyTotal, KeyFile, KeyRevocation, LedgerEntry, RenderAnswer, Reservation, SessionRecord, TokenRecord, UsageRecord, UserRecord } from './records.ts';
import type { AttemptSuccess, AttemptReservation, ThrottleView } from './throttle-rules.ts';
import type { QuotaExceeded } from './quota.ts';
import type { WriteHealth } from './write-health.ts';
import type { RowLost } from './refusal-tally.ts';
import type { DeviceSession, DeviceSessionCall, MintLimit, MintOutcome } from './device-sessions.ts';

// One store, two implementations: LMDB embedded in DATA_DIR (the default, one host) and
// PostgreSQL (DATABASE_URL, several stateless nodes on one database). The interface is cut
// at whole operations, never raw transactions, so each implementation can make every
// operation atomic its own way: an LMDB write transaction with a child transaction
// (lmdb/atomic.ts), or one PostgreSQL statement or stored function. Rules (quota, windows,
// fingerprints, messages, login throttling) are shared pure functions both call. Operations
// answer outcomes (ReserveOutcome, SettleOutcome), never HTTP errors: the use case decides
// what a caller hears.
//
// Each implementation is a folder with the same file per job (lmdb/reserve.ts and
// pg/reserve.ts, lmdb/idempotency.ts and pg/idempotency.ts ...) and a class that only
// delegates (lmdb/backend.ts, pg/index.ts); the rules and records both share live here beside
// this interface, which imports neither implementation. Adding an operation: declare it here
// in the role of the callers that need it (below), implement it in the job's file of lmdb/
// and of pg/, delegate from both classes (a schema change is a new
// entry at the end of pg/migrations.ts, never an edit of an applied one), and add a case to
// test/store/contract.ts, which runs against both.

// Parameters and answers of the operations below.

export interface ReserveInput {
  token: TokenRecord;
  moduleId: ModuleId;
  units: number;
  requestId: string;
  idempotencyKey: string | null;
  fingerprint: string | null;
  at: number;
  /** a call made with a device session: its captures count against the session's
   * max_captures in the same reservation (device-sessions.ts) */
  sessionId?: string | null;
}

/** What a reservation came to. Only `reserved` wrote anything; a refusal leaves no trace and
 * does not bind the key (contract "Result details"). The store says what happened; the use
 * case decides what the caller hears (src/verify/store-outcomes.ts). */
export type ReserveOutcome =
  | { kind: 'reserved'; reservation: Reservation }
  /** the key's call completed: its exact answer, replayed */
  | { kind: 'replay'; status: number; body: string }
  /** the key was used with a different request */
  | { kind: 'idempotency_conflict' }
  /** the key's first call is still running */
  | { kind: 'request_in_progress' }
  /** the key's first call could not be settled and waits for an operator: not in progress,
   * so polling would never end */
  | { kind: 'settlement_failed' }
  /** the token was revoked, disabled or expired (read again inside the reservation) */
  | { kind: 'invalid_token' }
  /** the token is no longer granted the module */
  | { kind: 'module_forbidden' }
  /** a device session's call: the session is revoked, expired or exhausted past use, or its
   * parent token is no longer live */
  | { kind: 'invalid_session_token' }
  /** a device session's call would pass the session's max_captures: refused whole */
  | { kind: 'session_captures_exceeded'; message: string }
  | QuotaExceeded;

/** What a settlement came to. */
export type SettleOutcome =
  /** charged, the key completed with `body`, the results stored */
  | { kind: 'settled'; body: string }
  /** not this call's to settle any more (PostgreSQL: its node's lease lapsed, so another node
   * may be refunding it): never charged, its units given back. `refunded`: by this call's own
   * refund (its units count as refunded in this node's metrics); false: by another (the lease
   * sweep of whichever node, which counts them), or owed (its refund failed: the sweep's). */
  | { kind: 'refused'; cause: Error; refunded: boolean }
  /** the units stay reserved and the key pending until an operator resolves the reservation
   * (marked settlement_failed, with the answer that could not be saved) */
  | { kind: 'settlement_failed'; cause: unknown }
  /** the store could not write the settlement (a full disk): nothing charged; the units are
   * back (`refunded`) or owed back once writes work (`refund_deferred`, store.writes) */
  | { kind: 'not_recorded'; refund: 'refunded' | 'refund_deferred'; cause: unknown }
  /** PostgreSQL: the database stopped answering during the settlement (a failover can lose
   * the acknowledgement of a commit that reached the promoted standby), so whether it
   * committed is unknown. The node resolves it as soon as a writable host answers: with a key
   * (`keyed`), charged once and the key completed (a retry replays the answer; until then it
   * answers request_in_progress); without one, refunded unless it had committed. */
  | { kind: 'outcome_unknown'; keyed: boolean; cause: unknown };

export interface PageQuery {
  token_id?: string;
  module_id?: string;
  from?: number;
  to?: number;
  cursor?: string;
  limit?: number;
  /** time order; `asc` (oldest first) unless asked */
  order?: 'asc' | 'desc';
}

export interface StoredResults {
  at: string;
  token_id: string;
  module_id: string;
  results: unknown;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface LedgerCheck {
  ok: boolean;
  entries: number;
  counters: number;
  mismatches: { key: unknown[]; counter: number; ledger: number }[];
}

/** Rows one filtered (status, outcome) audit call walks at most: about 0.1 s here, where a
 * filter matching nothing in 50,000 rows took 0.6 to 1.2 s to say so. The page may then be
 * short or empty with a next_cursor: the search goes on from there. */
export const AUDIT_SCAN_BUDGET = 10_000;

export interface SearchQuery {
  /** matched against the name (substring, ignoring case), the token prefix and the id
   * (both from their start) */
  q?: string;
  /** tokens only: the name, compared as names are for uniqueness (tokenNameKey: case and
   * Unicode composition ignored, nothing else), with `q` too when both are given */
  name?: string;
  limit: number;
  /** the last row of the previous page, as returned in `next` */
  after?: [string, string];
}

export interface SearchPage<T> {
  items: T[];
  /** key of the last row served when more may follow, else null */
  next: [string, string] | null;
}

export type ResolveAction = 'charge' | 'refund';

export interface UserPatch {
  enabled?: boolean;
  role?: UserRecord['role'];
  password_hash?: string;
}

// The store's roles: each caller asks only for the ones it uses (a use case, a route's
// helper, a CLI command), so a test gives it a small object of those methods and no cast, and
// a reader sees from a signature what a piece of code can change. They are cut by who calls
// what, not by table: CallerReads is what identifying a caller reads, MeteringStore what a verify
// call writes. StoreBackend, all of them with close(), is for the code that composes a process
// (the server, its API workers, the CLI) and for the two implementations.

/** What the store is and whether it answers: readiness, the write probe, the backend's kind. */
export interface StoreStatus {
  readonly kind: 'lmdb' | 'postgres';
  /** a cheap round trip that proves the store answers (readiness) */
  healthy(): Promise<boolean>;
  /** why the store is not healthy, or null; call after healthy(). `reason` names no host,
   * for the readiness answer, which anyone may read (PostgreSQL: since when no host accepted
   * writes; the node's lease not renewed); `detail` is the operator's, for the log: which
   * hosts of DATABASE_URL were tried and what each answered. */
  unavailableReason?(): { reason: string; detail: string } | null;
  /** whether writes are failing (a full disk), the repairs owed, the probe (write-health.ts) */
  readonly writes: WriteHealth;
  /** LMDB: how far its file is used and how much address space its map holds (metrics); absent
   * on PostgreSQL, whose size is the database server's to report */
  sizes?(): StoreSizes;
}

/** An LMDB store's size: `usedBytes`, data.mdb up to its last page in use (the file never
 * shrinks: pages freed are reused), and `mapBytes`, the map LMDB holds for it (LMDB_MAP_SIZE_GIB,
 * or twice that each time the store outgrew it: docs/capacity.md). */
export interface StoreSizes {
  usedBytes: number;
  mapBytes: number;
}

/** Identifying a caller: its business token by hash, a device session and its parent token. */
export interface CallerReads {
  getToken(id: string): Promise<TokenRecord | undefined>;
  getTokenByHash(hash: string): Promise<TokenRecord | undefined>;
  getDeviceSessionByHash(hash: string): Promise<DeviceSession | undefined>;
}

// users and tokens: read-modify-write happens inside the store, so concurrent operators on
// any worker or node never lose each other's changes

/** The operators' accounts (console users). */
export interface UserAccounts {
  getUser(id: string): Promise<UserRecord | undefined>;
  getUserByName(username: string): Promise<UserRecord | undefined>;
  listUsers(): Promise<UserRecord[]>;
  /** false when the name is taken (checked atomically with the insert) */
  createUser(user: UserRecord): Promise<boolean>;
  /** `check` sees the user before and after and every other user, all as the write commits
   * against them; a throw from it aborts the change */
  updateUser(id: string, patch: UserPatch, check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void): Promise<UserRecord | undefined>;
  /** users in username order, `q` matching the username or the id */
  searchUsers(q: SearchQuery): Promise<SearchPage<UserRecord>>;
}

/** Business tokens as the operator manages them (reading one by id is CallerReads'). */
export interface TokenAdmin {
  listTokens(): Promise<TokenRecord[]>;
  insertToken(token: TokenRecord): Promise<void>;
  updateToken(id: string, change: (t: TokenRecord) => TokenRecord): Promise<TokenRecord | undefined>;
  /** tokens in name order (case ignored) then id, `q` matching name, prefix or id, `name`
   * the name itself: a read of the tokens holding that name, not of every token */
  searchTokens(q: SearchQuery): Promise<SearchPage<TokenRecord>>;
}

/** Whether a module is switched on (every caller of a module asks). */
export interface ModuleReads {
  moduleEnabled(id: ModuleId): Promise<boolean>;
}

/** Switching a module on or off (the operator). */
export interface ModuleSwitches {
  setModuleEnabled(id: ModuleId, enabled: boolean): Promise<void>;
}

/** A verify call's charge: each of reserve, settle and refund is one atomic operation. */
export interface MeteringStore {
  /** idempotency lookup, token re-check, quota check and reservation, in one transaction */
  reserve(input: ReserveInput): Promise<ReserveOutcome>;
  /** charged + key completed with the body `render` builds from the usage as of settlement
   * + result stored, in one transaction; on failure marks the reservation settlement_failed */
  settle(reservation: Reservation, at: number, render: RenderAnswer, results: unknown): Promise<SettleOutcome>;
  /** gives held units back and releases the key; idempotent */
  refund(reservationId: string, at: number): Promise<Reservation | undefined>;
}

/** Settlements that failed, as an operator lists and resolves them. */
export interface Settlements {
  /** operator decision on a settlement_failed reservation; 'not_pending' when it is not one */
  resolveReservation(id: string, action: ResolveAction, at: number): Promise<Reservation | undefined | 'not_pending'>;
  listSettlementFailed(): Promise<Reservation[]>;
}

/** What was charged and answered, read back: a reservation, usage, the ledger, daily totals,
 * stored results. */
export interface UsageReads {
  getReservation(id: string): Promise<Reservation | undefined>;
  usageSnapshot(token: TokenRecord, at: number): Promise<UsageRecord[]>;
  listLedger(q: PageQuery): Promise<Page<Omit<LedgerEntry, 'windows'>>>;
  verifyLedger(): Promise<LedgerCheck>;
  /** units per UTC day in [fromDay, toDay], every day listed */
  dailyTotals(q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }): Promise<DailyTotal[]>;
  /** the result records a charged verify call answered, kept RETENTION_RESULTS_DAYS */
  getResults(requestId: string): Promise<StoredResults | undefined>;
  /** builds the console's derived indexes (issue 14) of a store written before they existed */
  ensureConsoleIndexes(): Promise<void>;
}

/** The audit line every verify call leaves. */
export interface AuditWrites {
  /** the call's own row; with `counted` (a call refused before it held a capacity slot) the
   * call is counted in its minute's row instead (refusal-tally.ts), resolved at once, and a
   * row the store could not write goes to `counted` */
  writeAudit(record: AuditRecord, counted?: RowLost): Promise<void>;
}

/** The audit, read by the console and the CLI. */
export interface AuditReads {
  /** `where` narrows the page (status/outcome filters); pages are filled up to the limit */
  listAudit(q: PageQuery, where?: (r: AuditRecord) => boolean): Promise<Page<AuditRecord>>;
}

/** Retention (docs/operations.md "Retention"): records older than `cutoff` (epoch ms) removed in
 * bounded batches, safe when several nodes prune at once; each returns how many went. */
export interface Retention {
  /** completed keys older than the retention, with their settled reservations */
  pruneIdempotency(at: number, retentionHours: number): Promise<number>;
  pruneAuditBefore(cutoff: number): Promise<number>;
  pruneResultsBefore(cutoff: number): Promise<number>;
  /** pruned ledger entries leave their units in per-counter totals, so verifyLedger() still holds */
  pruneLedgerBefore(cutoff: number): Promise<number>;
  /** sessions that expired before `cutoff`, with their calls */
  pruneDeviceSessionsBefore(cutoff: number): Promise<number>;
}

/** Refunds of reservations whose holder is gone. */
export interface Recovery {
  /** refunds pending reservations whose holder is gone (LMDB: its process; PostgreSQL: its
   * node's lease expired) and releases their keys; returns what it refunded */
  recoverPending(at: number): Promise<Reservation[]>;
  /** refunds the pending reservations of API worker `thread` of this process, which has exited
   * (src/cluster/cluster.ts replaces it), and releases their keys; other threads' and processes' stay */
  recoverThread(thread: number, at: number): Promise<Reservation[]>;
}

/** Administrator sessions, keyed by the SHA-256 of the cookie value. */
export interface AdminSessions {
  putSession(key: string, session: SessionRecord): Promise<void>;
  getSession(key: string): Promise<SessionRecord | undefined>;
  /** moves a session's idle clock to `lastSeen` (never back) if the session still exists, in
   * one write; false when it does not (a logout, a password change or a sweep ended it) */
  touchSession(key: string, lastSeen: number): Promise<boolean>;
  deleteSession(key: string): Promise<void>;
  /** ends a user's sessions except `keep`; returns how many */
  deleteUserSessions(userId: string, keep?: string): Promise<number>;
  /** drops sessions for which `alive` is false */
  sweepSessions(alive: (s: SessionRecord) => boolean): Promise<void>;
}

/** The login throttle (rules in throttle-rules.ts). */
export interface LoginThrottle {
  readThrottle(address: string, username: string, at: number): Promise<ThrottleView>;
  /** One transaction: `wait`, the seconds to wait when the throttle refuses this attempt
   * (nothing written), else 0 and the attempt is counted as a failure before its password is
   * checked (concurrent attempts see each other); `known` as in ThrottleView. A success then
   * calls recordLoginSuccess with `reservedAt: at`, which gives the address count back. */
  reserveLoginAttempt(address: string, username: string, at: number): Promise<AttemptReservation>;
  /** Gives back a reservation whose password was never checked (the hash was refused 503,
   * the store failed): each of its counts is lowered by one unless its window started after
   * `reservedAt`. The name's time of last failure stays where the reservation put it. */
  releaseLoginAttempt(address: string, username: string, reservedAt: number): Promise<void>;
  recordLoginFailure(address: string, username: string, at: number): Promise<void>;
  recordLoginSuccess(address: string, username: string, at: number, success?: AttemptSuccess): Promise<void>;
  sweepLoginThrottle(at: number): Promise<void>;
}

/** Verdict-signing keys, shared by every node (PostgreSQL only: LMDB keeps them in
 * DATA_DIR/keys files, signing/keys.ts, and its adapter throws). */
export interface SigningKeys {
  /** every stored key, oldest first; the current one has retired_at null */
  listSigningKeys(): Promise<KeyFile[]>;
  /** stores `candidate` as current unless a current key exists (decided atomically, so
   * nodes starting together agree on one key); returns the current key either way */
  createFirstSigningKey(candidate: KeyFile): Promise<KeyFile>;
  /** `next` becomes current and the previous current is retired at `at`, in one
   * transaction; keys retired at or before `deleteRetiredBefore` are deleted */
  rotateSigningKey(next: KeyFile, at: number, deleteRetiredBefore: number): Promise<{ kid: string; retired: string | null; deleted: string[] }>;
  /** emergency revocation of `kid`: unpublished at once (its private part dropped, the row
   * kept as the record of who and when); when it was current, `next` becomes current in the
   * same transaction. null when no such key exists. */
  revokeSigningKey(kid: string, next: KeyFile, at: number, by: string): Promise<KeyRevocation | null>;
  /** deletes the keys retired at or before `retiredBefore` (the retention pass: a rotation
   * deletes them too), revoked ones kept; their kids */
  deleteRetiredSigningKeys(retiredBefore: number): Promise<string[]>;
}

/** Device sessions (issue 26; rules in device-sessions.ts); reading one by hash is CallerReads'. */
export interface DeviceSessions {
  /** stores `session` unless its parent minted `limit.limit` sessions within the window
   * (decided atomically, so concurrent mints on any worker or node cannot pass it together) */
  createDeviceSession(session: DeviceSession, limit: MintLimit, at: number): Promise<MintOutcome>;
  getDeviceSession(id: string): Promise<DeviceSession | undefined>;
  /** revoked at `at` unless already revoked; undefined when no such session */
  revokeDeviceSession(id: string, at: number): Promise<DeviceSession | undefined>;
  /** the verify calls made with the session, in the order they were reserved */
  listDeviceSessionCalls(id: string): Promise<DeviceSessionCall[]>;
  /** the token's sessions still usable at `at` (not revoked, not expired), newest first */
  listActiveDeviceSessions(tokenId: string, at: number): Promise<DeviceSession[]>;
}

/** The whole store: every role, and its close. Only the code that composes a process holds it. */
export interface StoreBackend
  extends StoreStatus, CallerReads, UserAccounts, TokenAdmin, ModuleReads, ModuleSwitches, MeteringStore, Settlements, UsageReads,
    AuditWrites, AuditReads, Retention, Recovery, AdminSessions, LoginThrottle, SigningKeys, DeviceSessions {
  close(): Promise<void>;
}
