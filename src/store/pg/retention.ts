import { isoOf, type Pg } from './open.ts';

/** rows per retention statement: short enough not to hold row locks for long */
export const PRUNE_BATCH = 1000;

// Retention: each batch is one statement (its own transaction), at most PRUNE_BATCH rows,
// with SKIP LOCKED so nodes pruning at once take different rows and never wait on each other.
export async function pruneBatches(db: Pg, sql: string, args: unknown[]): Promise<number> {
  let removed = 0;
  for (;;) {
    const n = (await db.q(sql, args)).rows[0]!.n as number;
    removed += n;
    if (n === 0) return removed;
  }
}

export function pruneAuditBefore(db: Pg, cutoff: number) {
  return pruneBatches(db, `
    WITH doomed AS (
      DELETE FROM audit WHERE (at_ms, request_id) IN (
        SELECT at_ms, request_id FROM audit WHERE at_ms < $1 ORDER BY at_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*)::int AS n FROM doomed`, [cutoff]);
}

export function pruneResultsBefore(db: Pg, cutoff: number) {
  return pruneBatches(db, `
    WITH doomed AS (
      DELETE FROM results WHERE request_id IN (
        SELECT request_id FROM results WHERE record->>'at' < $1 ORDER BY record->>'at' LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*)::int AS n FROM doomed`, [isoOf(cutoff)]);
}

/** Entries and their units move to ledger_pruned in the same statement: never one without the other. */
export function pruneLedgerBefore(db: Pg, cutoff: number) {
  return pruneBatches(db, `
    WITH doomed AS (
      DELETE FROM ledger WHERE id IN (
        SELECT id FROM ledger WHERE at_ms < $1 ORDER BY at_ms LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)
      RETURNING token_id, module_id, units, kind, day, month),
    totals AS (
      SELECT token_id, module_id, p.period, p.win, sum(CASE kind WHEN 'charge' THEN units ELSE -units END) AS units
      FROM doomed, LATERAL (VALUES ('day', day), ('month', month), ('never', 'all')) AS p(period, win)
      GROUP BY token_id, module_id, p.period, p.win),
    kept AS (
      INSERT INTO ledger_pruned AS lp (token_id, module_id, period, win, units) SELECT * FROM totals
      ON CONFLICT (token_id, module_id, period, win) DO UPDATE SET units = lp.units + EXCLUDED.units)
    SELECT count(*)::int AS n FROM doomed`, [cutoff]);
}
