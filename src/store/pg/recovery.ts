import type { Reservation } from '../records.ts';
import { isoOf, type Pg } from './open.ts';
import { reservationOf } from './settle.ts';

/** Refunds the pending reservations of nodes whose lease expired (lv_sweep_expired, under
 * row locks, so nodes sweeping at once refund each one once) and releases their keys. A node
 * still renewing its lease is in flight and keeps its reservations. */
export async function recoverPending(db: Pg, at: number): Promise<Reservation[]> {
  const swept = (await db.q('SELECT * FROM lv_sweep_expired($1, $2)', [at, isoOf(at)])).rows.map(reservationOf);
  // nodes long dead that hold nothing any more (CLI runs, crashed processes) are forgotten
  await db.q(`DELETE FROM nodes n WHERE n.lease_until < now() - interval '1 hour' AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`);
  return swept;
}
