import os from 'node:os';
import { currentProcess } from '../owner.ts';
import type { Reservation } from '../records.ts';
import { isoOf, type Pg } from './open.ts';
import { reservationOf } from './settle.ts';

// PostgreSQL's recovery rule: a stored function, written here beside its jobs as
// lmdb/recovery.ts holds LMDB's, installed where the database's differs (rules.ts: checked at
// every start, under the migration lock). Each reservation it takes is refunded by lv_refund_held (settle.ts).

// Crash recovery without pids: pending reservations of nodes whose lease expired are refunded
// by whichever node sweeps first; SKIP LOCKED lets sweepers and late settlements pass each other
// instead of queueing. The database's clock alone cannot tell a dead node: a forward step of the
// database host's clock larger than the lease made every live node's lease look lapsed at once,
// and the sweep refunded the live nodes' calls in inference (their settlements refused: 500
// inference_failed for inference that worked). So the sweep takes only the nodes its caller
// names (p_nodes), each with the lease value its caller watched lapse (p_leases: lease_until in
// microseconds, leaseUs), and only if that lease is still lapsed and still that value: a node
// that renewed since (a live one, after a clock step) is left. recoverPending says which nodes.
// A reservation whose node row is gone is taken too: a node's close() deletes its row once it
// holds nothing pending, and a reservation committing just after that check was left pending
// for ever (lv_settle refuses a node without a live row, so nobody else could end it).
const LV_SWEEP_EXPIRED = `CREATE OR REPLACE FUNCTION lv_sweep_expired(p_at_ms bigint, p_iso text, p_nodes text[], p_leases bigint[]) RETURNS SETOF reservations LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  FOR r IN
    UPDATE reservations SET state = 'refunded', settled_at = p_iso, settled_ms = p_at_ms
      WHERE id IN (
        SELECT x.id FROM reservations x LEFT JOIN nodes n ON n.id = x.node_id
          WHERE x.state = 'pending' AND (n.id IS NULL OR (n.lease_until <= now()
            AND (n.id, (extract(epoch FROM n.lease_until) * 1000000)::bigint) IN (SELECT * FROM unnest(p_nodes, p_leases))))
          FOR UPDATE OF x SKIP LOCKED)
      RETURNING *
  LOOP
    PERFORM lv_refund_held(r, p_at_ms, p_iso, 'led_' || md5(r.id || ':refund'));
    RETURN NEXT r;
  END LOOP;
END $$`;

/** a node's lease_until as lv_sweep_expired compares it: microseconds, exact */
const leaseUs = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint`;

/** installed by rules.ts */
export const RECOVERY_RULES: readonly string[] = [LV_SWEEP_EXPIRED];

/** Refunds the pending reservations of nodes whose lease expired (lv_sweep_expired, under
 * row locks, so nodes sweeping at once refund each one once) and releases their keys.
 *
 * A lease is taken only once this node has seen it lapsed, with the same lease_until (so not
 * renewed since), for at least a whole lease (its own or the holder's, the longer) of its own
 * monotonic time (performance.now(),
 * which no clock step moves): at least two sweeps apart. A live node renews every third of a
 * lease (lease.ts), and renews a lease that looks lapsed only because the database's clock
 * stepped forward (its own clock says it renewed in time), so by then its lease has a new
 * value and is not taken; a dead one's stays as it was and is taken, a lease (plus a sweep's
 * period) later than the database's clock alone would have. This node's own lease is never
 * taken: it is alive, and renews instead. */
export async function recoverPending(db: Pg, at: number): Promise<Reservation[]> {
  // the holder's own lease length where it recorded one (lease.ts register; nodes of earlier
  // builds did not): a node renews every third of its own lease, so a sweeper whose lease is
  // shorter must wait the holder's, or a step would still take a live node's (review3b: a 2 s
  // sweeper took a 30 s node's call in flight)
  const lapsed = (await db.q(
    `SELECT id, ${leaseUs('lease_until')}::text AS lease, CASE WHEN info->>'lease_ms' ~ '^[0-9]{1,12}$' THEN (info->>'lease_ms')::bigint END AS lease_ms
      FROM nodes WHERE lease_until <= now() AND id <> $1`,
    [db.node],
  )).rows as { id: string; lease: string; lease_ms: string | null }[];
  const seenAt = performance.now();
  const watched = new Map<string, { lease: string; since: number }>();
  const holderLease = new Map<string, number>();
  for (const n of lapsed) {
    const before = db.watched.get(n.id);
    watched.set(n.id, before?.lease === n.lease ? before : { lease: n.lease, since: seenAt });
    holderLease.set(n.id, Math.max(db.leaseMs, Number(n.lease_ms ?? 0)));
  }
  db.watched = watched;
  const dead = [...watched].filter(([id, w]) => seenAt - w.since >= holderLease.get(id)!);
  const [nodes, leases] = [dead.map(([id]) => id), dead.map(([, w]) => w.lease)];
  const swept = await sweep(db, at, nodes, leases);
  // nodes long dead that hold nothing any more (CLI runs, crashed processes) are forgotten,
  // dead by the same rule (a live node's row deleted would make it register anew, and a
  // reservation it made meanwhile would be taken as one whose node row is gone)
  await db.q(
    `DELETE FROM nodes n WHERE n.lease_until < now() - interval '1 hour' AND (n.id, ${leaseUs('n.lease_until')}) IN (SELECT * FROM unnest($1::text[], $2::bigint[]))
      AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.node_id = n.id AND r.state = 'pending')`,
    [nodes, leases],
  );
  return swept;
}

async function sweep(db: Pg, at: number, nodes: string[], leases: string[]): Promise<Reservation[]> {
  return (await db.q('SELECT * FROM lv_sweep_expired($1, $2, $3::text[], $4::bigint[])', [at, isoOf(at), nodes, leases])).rows.map(reservationOf);
}

/** Ends the lease of the node that API worker `thread` of this process registered (lease.ts
 * names pid, its start time, thread and host in the node's info) and sweeps it at once, so a
 * replaced worker's reservations are refunded now rather than when its lease lapses. The
 * worker has exited, so the node cannot renew; other workers are other nodes and keep theirs.
 * This sweep takes only the nodes it ended (lapsed already or not: a clock step may have made
 * its lease look lapsed); other lapsed ones are the periodic sweep's (recoverPending). */
export async function recoverThread(db: Pg, thread: number, at: number): Promise<Reservation[]> {
  const self = currentProcess();
  const ended = (await db.q(
    `UPDATE nodes SET lease_until = now() - interval '1 millisecond'
      WHERE info->>'host' = $1 AND (info->>'pid')::int = $2 AND info->>'pid_start' IS NOT DISTINCT FROM $3 AND (info->>'thread')::int = $4
      RETURNING id, ${leaseUs('lease_until')}::text AS lease`,
    [os.hostname(), self.pid, self.pid_start, thread],
  )).rows as { id: string; lease: string }[];
  return sweep(db, at, ended.map((n) => n.id), ended.map((n) => n.lease));
}
