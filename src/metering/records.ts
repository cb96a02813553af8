import type { ModuleId } from '../packets/types.ts';
import type { AuditOutcome } from './outcome.ts';

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
  /** PostgreSQL store: the node (one process start) that holds it, swept once its lease expires */
  node?: string;
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
}
