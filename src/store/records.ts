import type { JWK } from 'jose';
import type { ModuleId } from '../contract/index.ts';

export type Role = 'admin' | 'user';
export type Period = 'day' | 'month' | 'never';

export interface UserRecord {
  id: string;
  username: string;
  role: Role;
  enabled: boolean;
  password_hash: string;
  created_at: string;
}

export interface Grant {
  module_id: ModuleId;
  limit: number | null;
  period: Period;
}

export interface TokenRecord {
  id: string;
  name: string;
  /** first characters of the plaintext, enough to recognise it in a list, too few to use */
  token_prefix: string;
  /** hex SHA-256 of the plaintext; the plaintext itself is never stored */
  hash: string;
  enabled: boolean;
  expires_at: string | null;
  demo: boolean;
  revoked: boolean;
  created_at: string;
  grants: Grant[];
}

export interface ModuleState {
  module_id: ModuleId;
  enabled: boolean;
}

/** A verdict-signing key (Ed25519, as a private JWK) and its life: current until retired,
 * published for a while after. Kept in DATA_DIR/keys with LMDB, in a table with PostgreSQL. */
export interface KeyFile {
  kid: string;
  created_at: string;
  retired_at: string | null;
  /** set by an emergency revocation (`keys revoke`): never published again, and the record
   * keeps only the public part of the key, with who revoked it and when */
  revoked_at?: string | null;
  revoked_by?: string | null;
  jwk: JWK;
}

/** What `keys revoke` did: `current` is the kid that signs afterwards (a new one when the
 * revoked key was current). */
export interface KeyRevocation {
  kid: string;
  revoked_at: string;
  revoked_by: string | null;
  current: string | null;
  already_revoked: boolean;
}

// Metering (the ledger, reservations, idempotency, audit): written by both stores, read by
// the use cases and the admin API.

/** What a verify call decided, as the audit log keeps it (metering/outcome.ts derives it). */
export const AUDIT_OUTCOMES = ['live', 'non_live', 'retry', 'mixed', 'error'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

export type LedgerKind = 'charge' | 'refund';

/** One line of the append-only usage ledger. A charge is written when units are taken from
 * the quota (reservation); a refund when they are given back (inference failure, crash
 * recovery, operator refund). Counters always equal charges minus refunds. */
export interface LedgerEntry {
  id: string;
  request_id: string;
  token_id: string;
  module_id: ModuleId;
  units: number;
  kind: LedgerKind;
  at: string;
  /** the quota windows the units were counted in (those of the reservation time) */
  windows: { day: string; month: string };
}

export type ReservationState = 'pending' | 'charged' | 'refunded' | 'settlement_failed';

/** Units held for one verify call from reservation to settlement. */
export interface Reservation {
  id: string;
  request_id: string;
  token_id: string;
  module_id: ModuleId;
  units: number;
  state: ReservationState;
  windows: { day: string; month: string };
  created_at: string;
  settled_at: string | null;
  /** process that holds it; start-up recovery settles pending ones whose process is gone */
  pid: number;
  /** that process's start time (owner.ts); absent on records written before it was kept */
  pid_start?: string | null;
  /** its PID namespace and boot (owner.ts); absent on records written before they were kept */
  pid_ns?: string | null;
  boot_id?: string | null;
  /** PostgreSQL store: the node (one process start) that holds it, swept once its lease expires */
  node?: string;
  /** LMDB store: the API worker thread (worker_threads threadId) that holds it, so the reservations of
   * a worker that dies are recovered when it is replaced, not at the next start; absent on older records */
  thread?: number;
  idempotency_key: string | null;
  /** for settlement_failed: the answer that could not be saved, so "charge" can complete it */
  unsaved_body: string | null;
}

export type IdempotencyState = 'pending' | 'completed';

export interface IdempotencyRecord {
  token_id: string;
  key: string;
  state: IdempotencyState;
  fingerprint: string;
  request_id: string;
  reservation_id: string;
  created_at: string;
  completed_at: string | null;
  status: number | null;
  /** the saved response body, replayed byte for byte */
  body: string | null;
}

export interface AuditRecord {
  request_id: string;
  at: string;
  token_id: string | null;
  module_id: string | null;
  client_ip: string;
  country: string | null;
  status: number;
  error_code: string | null;
  captures: number;
  charged_units: number;
  latency_ms: number;
  /** live, non_live, retry or mixed for a 200 answer, error otherwise; absent on records
   * written before it was kept */
  outcome?: AuditOutcome;
  /** the answer was an idempotent replay (no inference, no charge); absent likewise */
  replayed?: boolean;
  /** the device session the call was made with (issue 26); absent for a business token */
  session_id?: string;
  /** a row counting refused calls (src/store/refusal-tally.ts): the calls refused before a
   * capacity slot in one minute with the same token, session, module, client address, status
   * and code; the other fields are the first call's, latency_ms the longest. Absent on a
   * call's own row (one call) */
  calls?: number;
  /** the last counted call's time; absent on a call's own row */
  last_at?: string;
}

/** An administrator session, kept server-side (auth/session.ts). */
export interface SessionRecord {
  user_id: string;
  username: string;
  role: Role;
  csrf_token: string;
  created_at: number;
  last_seen: number;
  /** absolute end (created_at + SESSION_ABSOLUTE_HOURS) */
  expires_at: number;
}

/** The spec's usage record. */
export interface UsageRecord {
  module_id: ModuleId;
  limit: number | null;
  period: Period;
  used: number;
  remaining: number | null;
  reset_at: string | null;
}

/** What a settlement's `render` is given where the usage goes: the snapshot itself (LMDB), or
 * a placeholder (PostgreSQL: a random JSON string) that the store's SQL replaces, in the text
 * `render` returned, with the usage as of the settlement's own transaction. So `render` writes it
 * with JSON.stringify and reads it only where it is an array. */
export type UsagePlaceholder = string & { readonly usagePlaceholder: true };
/** Renders a settlement's answer around the usage (UsagePlaceholder says what it may be). */
export type RenderAnswer = (usage: UsageRecord[] | UsagePlaceholder) => string;

/** Units of one UTC day (the console's usage chart). */
export interface DailyTotal {
  /** YYYY-MM-DD, a UTC day */
  day: string;
  charged: number;
  refunded: number;
  /** charged minus refunded */
  units: number;
}
