import { now } from '../clock.ts';
import { readLatest, type Store } from '../store/open.ts';
import type { Reservation } from './records.ts';
import { resolveReservation } from './settle.ts';

export interface SettlementView {
  id: string;
  request_id: string;
  token_id: string;
  module_id: string;
  units: number;
  state: string;
  created_at: string;
  idempotency_key: string | null;
  has_saved_answer: boolean;
}

function view(r: Reservation): SettlementView {
  return {
    id: r.id,
    request_id: r.request_id,
    token_id: r.token_id,
    module_id: r.module_id,
    units: r.units,
    state: r.state,
    created_at: r.created_at,
    idempotency_key: r.idempotency_key,
    has_saved_answer: r.unsaved_body !== null,
  };
}

/** Reservations whose settlement could not be written: they need an operator. */
export function listPendingSettlements(store: Store): SettlementView[] {
  readLatest(store);
  const out: SettlementView[] = [];
  for (const { value } of store.db.reservations.getRange({})) {
    const r = value as Reservation;
    if (r.state === 'settlement_failed') out.push(view(r));
  }
  return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
}

export async function resolveSettlement(store: Store, id: string, action: 'charge' | 'refund'): Promise<SettlementView | undefined | 'not_pending'> {
  const r = await resolveReservation(store, id, action, now());
  return r === undefined || r === 'not_pending' ? r : view(r);
}
