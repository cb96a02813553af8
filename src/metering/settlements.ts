import { now } from '../clock.ts';
import type { Reservation, Settlements } from '../store/index.ts';

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
export async function listPendingSettlements(store: Settlements): Promise<SettlementView[]> {
  return (await store.listSettlementFailed()).map(view);
}

export async function resolveSettlement(store: Settlements, id: string, action: 'charge' | 'refund'): Promise<SettlementView | undefined | 'not_pending'> {
  const r = await store.resolveReservation(id, action, now());
  return r === undefined || r === 'not_pending' ? r : view(r);
}
