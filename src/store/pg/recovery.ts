import os from 'node:os';
import { currentProcess } from '../owner.ts';
import type { Reservation } from '../records.ts';
import { isoOf, type Pg } from './open.ts';
import { reservationOf } from './settle.ts';

// PostgreSQL's recovery rule: a stored function, written here beside its jobs as
// lmdb/recovery.ts holds LMDB's, installed where the database's differs (rules.ts: checked at
// every start, under the migration lock). Each reservation it takes is refunded by lv_refund_held (settle.ts).

// Crash recovery without pids: pending reservations of nodes whose lease expired (database
// clock) are refunded by whichever node sweeps first; SKIP LOCKED lets sweepers and
// late settlements pass each other instead of queueing. A reservation whose node row is gone
// is taken too: a node's close() deletes its row once it holds nothing pending, and a
// reservation committing just after that check was left pending for ever (lv_settle refuses a
// node without a live row, so nobody else could end it).
const LV_SWEEP_EXPIRED = `CREATE OR REPLACE FUNCTION lv_sweep_expired(p_at_ms bigint, p_iso text) RETURNS SETOF reservations LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  FOR r IN
    UPDATE reservations SET state = 'refunded', settled_at = p_iso, settled_ms = p_at_ms
      WHERE id IN (
        SELECT x.id FROM reservations x LEFT JOIN nodes n ON n.id = x.node_id
          WHERE x.state = 'pending' AND (n.id IS NULL OR n.lease_until <= now())
          FOR UPDATE OF x SKIP LOCKED)
      RETURNING *
  LOOP
    PERFORM lv_refund_held(r, p_at_ms, p_iso, 'led_' || md5(r.id || ':refund'));
    RETURN NEXT r;
  END LOOP;
END $$`;

/** installed by rules.ts */
export const RECOVERY_RULES: readonly string[] = [LV_SWEEP_EXPIRED];

/** Refunds the pending reservations of nodes whose lease expired (lv_sweep_expired, under
 * row locks, so nodes sweeping at once refund each one once) and releases their keys. A node
 * still renewing its lease is in flight and keeps its reservations. */
export async function recoverPending(db: Pg, at: number): Promise<Reservation[]> {
  const swept = (await db.q('SELECT * FROM lv_sweep_expired($1, $2)', [at, isoOf(at)])).rows.map(reservationOf);
  // nodes long dead that hold nothing any more (CLI runs, crashed processes) are forgotten
  await db.q(`DELETE FROM nodes n WHERE n.lease_until < now() - interval '1 hour' AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`);
  return swept;
}

/** Ends the lease of the node that API worker `thread` of this process registered (lease.ts
 * names pid, its start time, thread and host in the node's info) and sweeps it at once, so a
 * replaced worker's reservations are refunded now rather than when its lease lapses. The
 * worker has exited, so the node cannot renew; other workers are other nodes and keep theirs.
 * The sweep is lv_sweep_expired's, under its row locks, so it also takes any other node whose
 * lease lapsed (the periodic sweep would). */
export async function recoverThread(db: Pg, thread: number, at: number): Promise<Reservation[]> {
  const self = currentProcess();
  await db.q(
    `UPDATE nodes SET lease_until = now() - interval '1 millisecond'
      WHERE info->>'host' = $1 AND (info->>'pid')::int = $2 AND info->>'pid_start' IS NOT DISTINCT FROM $3 AND (info->>'thread')::int = $4 AND lease_until > now()`,
    [os.hostname(), self.pid, self.pid_start, thread],
  );
  return (await db.q('SELECT * FROM lv_sweep_expired($1, $2)', [at, isoOf(at)])).rows.map(reservationOf);
}
