import type { LedgerCheck, Page, PageQuery } from '../backend.ts';
import type { LedgerEntry } from '../records.ts';
import { isoOf, type Pg, type Row } from './open.ts';

export const cursorOf = (at: number, id: string) => Buffer.from(JSON.stringify([at, id])).toString('base64url');

export async function pageByTime<T>(db: Pg, table: 'ledger' | 'audit', q: PageQuery, row: (r: Row) => T, idCol: string): Promise<Page<T>> {
  const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
  const where = ['at_ms >= $1', 'at_ms < $2'];
  const values: unknown[] = [q.from ?? 0, q.to ?? Number.MAX_SAFE_INTEGER];
  const desc = q.order === 'desc';
  if (q.cursor) {
    const [cAt, cId] = JSON.parse(Buffer.from(q.cursor, 'base64url').toString('utf8')) as [number, string];
    values.push(cAt, cId);
    where.push(`(at_ms, ${idCol}) ${desc ? '<' : '>'} ($${values.length - 1}, $${values.length})`);
  }
  const col = table === 'ledger' ? 'token_id' : "record->>'token_id'";
  const mcol = table === 'ledger' ? 'module_id' : "record->>'module_id'";
  if (q.token_id) where.push(`${col} = $${values.push(q.token_id)}`);
  if (q.module_id) where.push(`${mcol} = $${values.push(q.module_id)}`);
  const rows = (await db.q(`SELECT * FROM ${table} WHERE ${where.join(' AND ')} ORDER BY at_ms ${desc ? 'DESC' : ''}, ${idCol} ${desc ? 'DESC' : ''} LIMIT ${limit + 1}`, values)).rows;
  const more = rows.length > limit;
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return { items: items.map(row), next_cursor: more && last ? cursorOf(last.at_ms, last[idCol]) : null };
}

export function listLedger(db: Pg, q: PageQuery): Promise<Page<Omit<LedgerEntry, 'windows'>>> {
  return pageByTime(db, 'ledger', q, (r) => ({ id: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, kind: r.kind, at: isoOf(r.at_ms) }), 'id');
}

export async function verifyLedger(db: Pg): Promise<LedgerCheck> {
  return db.tx(async (c) => {
    // one snapshot for both sides, or a reservation between the two reads would show as a mismatch
    await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    const entries = (await c.query('SELECT count(*)::int AS n FROM ledger')).rows[0]!.n as number;
    const counters = (await c.query('SELECT count(*)::int AS n FROM counters')).rows[0]!.n as number;
    const rows = (
      await c.query(`
        WITH expected AS (
          SELECT token_id, module_id, period, win, sum(units) AS units FROM (
            SELECT token_id, module_id, p.period, p.win, CASE kind WHEN 'charge' THEN units ELSE -units END AS units
            FROM ledger, LATERAL (VALUES ('day', day), ('month', month), ('never', 'all')) AS p(period, win)
            UNION ALL
            SELECT token_id, module_id, period, win, units FROM ledger_pruned) AS all_units
          GROUP BY token_id, module_id, period, win)
        SELECT coalesce(c.token_id, e.token_id) AS t, coalesce(c.module_id, e.module_id) AS m, coalesce(c.period, e.period) AS p,
               coalesce(c.win, e.win) AS w, coalesce(c.used, 0) AS counter, coalesce(e.units, 0)::bigint AS ledger
        FROM counters c FULL JOIN expected e USING (token_id, module_id, period, win)
        WHERE coalesce(c.used, 0) <> coalesce(e.units, 0)`)
    ).rows;
    const mismatches = rows.map((r) => ({ key: [r.t, r.m, r.p, r.w], counter: r.counter as number, ledger: r.ledger as number }));
    return { ok: mismatches.length === 0, entries, counters, mismatches };
  });
}
