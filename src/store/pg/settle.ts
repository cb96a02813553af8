import { randomBytes } from 'node:crypto';
import type { ResolveAction, SettleOutcome } from '../backend.ts';
import type { Reservation, UsageRecord } from '../records.ts';
import { isStorageFailure } from '../write-health.ts';
import { resolveKey } from './idempotency.ts';
import { StoreUnavailableError } from '../errors.ts';
import { isoOf, type Pg, type Row } from './open.ts';
import { windowsOf } from './usage.ts';
import { holdForever } from '../faults.ts';

export function reservationOf(r: Row): Reservation {
  return {
    id: r.id,
    request_id: r.request_id,
    token_id: r.token_id,
    module_id: r.module_id,
    units: r.units,
    state: r.state,
    windows: { day: r.day, month: r.month },
    created_at: r.created_at,
    settled_at: r.settled_at,
    pid: 0,
    node: r.node_id,
    idempotency_key: r.idempotency_key,
    unsaved_body: r.unsaved_body,
  };
}

export async function settle(db: Pg, reservation: Reservation, at: number, render: (usage: UsageRecord[]) => string, results: unknown, fault: 'fail' | 'hold' | null = null): Promise<SettleOutcome> {
  const w = windowsOf(at);
  // The body is rendered here with a placeholder for the usage array, and the function
  // fills in the usage as of the settlement itself: one call, and the saved body is the
  // answer. The placeholder is random, so no client text can imitate it.
  const marker = `"__usage_${randomBytes(12).toString('hex')}__"`;
  const template = render(JSON.parse(marker) as unknown as UsageRecord[]);
  let cause: unknown;
  if (fault !== 'fail') {
    try {
      const args = [
        reservation.id, at, isoOf(at), template, marker, { at: isoOf(at), token_id: reservation.token_id, module_id: reservation.module_id, results }, w.day, w.month, w.resetDay, w.resetMonth,
      ];
      const sql = 'SELECT lv_settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS r';
      // the test fault: the same function inside an explicit transaction, stopped before COMMIT
      if (fault === 'hold') await db.tx(async (c) => holdForever(`postgres settlement transaction (lv_settle ${(await c.query(sql, args)).rowCount} row)`));
      const out = (await db.q(sql, args, 'lv_settle')).rows[0]!.r as { ok: boolean; body?: string; state?: string };
      if (out.ok) return { kind: 'settled', body: out.body! };
      // Refused: this node's lease lapsed (another node may be refunding it) or the
      // reservation is no longer pending. Never charged, and its units are back (refund is
      // idempotent).
      await refund(db, reservation.id, at).catch(() => {});
      return { kind: 'refused', cause: new Error(`settlement refused: reservation ${reservation.id} is ${out.state ?? 'missing'} or its node lease lapsed`) };
    } catch (err) {
      cause = err;
    }
  } else cause = new Error('injected settlement failure (TEST_SETTLEMENT_FAIL_PREFIX)');
  if (isStorageFailure(cause)) {
    // the database could not write the settlement (a full disk): nothing was charged, so the
    // units go back now, or once it can write (repairs), and the answer says which
    const refunded = await refund(db, reservation.id, at).then(() => true, () => {
      db.repairs.set(reservation.id, { kind: 'refund', at });
      return false;
    });
    return { kind: 'not_recorded', refund: refunded ? 'refunded' : 'refund_deferred', cause };
  }
  // The units stay reserved and the key pending for an operator; the answer that could not
  // be saved is kept on the reservation, so a "charge" resolution can complete the key.
  let marked: unknown = null;
  try {
    const usage = JSON.parse((await db.q('SELECT lv_usage_json($1, $2, $3, $4, $5) AS u', [reservation.token_id, w.day, w.month, w.resetDay, w.resetMonth])).rows[0]!.u as string) as UsageRecord[];
    await db.q(`UPDATE reservations SET state = 'settlement_failed', unsaved_body = $2 WHERE id = $1 AND state = 'pending'`, [reservation.id, render(usage)]);
  } catch (err) {
    marked = err;
    // owed: marked for the operator once the database answers again (unless it did commit);
    // without the usage as of settlement no answer is kept, so "charge" releases the key
    if (err instanceof StoreUnavailableError) db.repairs.set(reservation.id, { kind: 'mark', body: null });
  }
  return { kind: 'settlement_failed', cause: marked === null ? cause : new AggregateError([cause, marked], 'settlement failed, and marking it settlement_failed failed too') };
}

export async function refund(db: Pg, reservationId: string, at: number) {
  let rows: Row[];
  try {
    rows = (await db.q('SELECT * FROM lv_refund($1, $2, $3, $4)', [reservationId, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows;
  } catch (err) {
    // the units are owed back: refunded once the database answers again
    if (err instanceof StoreUnavailableError) db.repairs.set(reservationId, { kind: 'refund', at });
    throw err;
  }
  return rows[0] ? reservationOf(rows[0]) : undefined;
}

export async function resolveReservation(db: Pg, id: string, action: ResolveAction, at: number): Promise<Reservation | undefined | 'not_pending'> {
  return db.tx(async (c) => {
    const r = (await c.query('SELECT * FROM reservations WHERE id = $1 FOR UPDATE', [id])).rows[0];
    if (!r) return undefined;
    if (r.state !== 'settlement_failed') return 'not_pending' as const;
    if (action === 'refund') {
      return reservationOf((await c.query('SELECT * FROM lv_refund($1, $2, $3, $4)', [id, at, isoOf(at), `led_${randomBytes(9).toString('base64url')}`])).rows[0]!);
    }
    const next = (await c.query(`UPDATE reservations SET state = 'charged', settled_at = $2, settled_ms = $3, unsaved_body = NULL WHERE id = $1 RETURNING *`, [id, isoOf(at), at])).rows[0]!;
    await resolveKey(c, r, at);
    return reservationOf(next);
  });
}

export async function getReservation(db: Pg, id: string) {
  const r = (await db.q('SELECT * FROM reservations WHERE id = $1', [id])).rows[0];
  return r ? reservationOf(r) : undefined;
}

export async function listSettlementFailed(db: Pg) {
  return (await db.q(`SELECT * FROM reservations WHERE state = 'settlement_failed' ORDER BY created_at, id`)).rows.map(reservationOf);
}
