import type pg from 'pg';
import { isoOf, type Pg, type Row } from './open.ts';
import { PRUNE_BATCH, pruneBatches } from './retention.ts';

// Idempotency keys (contract "Idempotency"), as in lmdb/idempotency.ts: a key is bound
// (pending) with the reservation that admits its first call, completed with the exact answer
// when that call settles, released when its units go back, and pruned once completed and
// older than the retention. The hot path's key writes run inside the stored functions, in
// the same statement as the reservation they belong to (lv_reserve in reserve.ts looks
// the key up and binds it, lv_settle in settle.ts completes it, lv_refund releases it); what runs from
// here is the operator's resolution and the pruning.

/** An operator charged the settlement_failed reservation `r` (its row locked by the caller's
 * transaction): its key replays the answer kept on it, or, with none kept, is released. */
export async function resolveKey(c: pg.PoolClient, r: Row, at: number): Promise<void> {
  if (r.idempotency_key === null) return;
  if (r.unsaved_body !== null) {
    await c.query(`UPDATE idempotency SET state = 'completed', completed_at = $4, completed_ms = $5, status = 200, body = $6 WHERE token_id = $1 AND key = $2 AND reservation_id = $3`, [r.token_id, r.idempotency_key, r.id, isoOf(at), at, r.unsaved_body]);
  } else {
    await c.query('DELETE FROM idempotency WHERE token_id = $1 AND key = $2 AND reservation_id = $3', [r.token_id, r.idempotency_key, r.id]);
  }
}

/** Completed keys older than the retention, with their settled reservations; pending ones stay.
 * In batches (retention.ts pruneBatches): a day's keys in one statement held their rows and
 * wrote their WAL in one long transaction, and a second node pruning at once waited on it. */
export async function pruneIdempotency(db: Pg, at: number, retentionHours: number) {
  const cutoff = at - retentionHours * 3600_000;
  const pruned = await pruneBatches(db, `
    WITH doomed AS (
      DELETE FROM idempotency WHERE (token_id, key) IN (
        SELECT token_id, key FROM idempotency WHERE state = 'completed' AND completed_ms < $1 ORDER BY completed_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*)::int AS n FROM doomed`, [cutoff]);
  await pruneBatches(db, `
    WITH doomed AS (
      DELETE FROM reservations WHERE id IN (
        SELECT id FROM reservations WHERE state IN ('charged', 'refunded') AND settled_ms < $1 ORDER BY settled_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*)::int AS n FROM doomed`, [cutoff]);
  return pruned;
}
