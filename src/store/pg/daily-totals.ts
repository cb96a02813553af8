import { dayTotals } from '../periods.ts';
import type { DailyTotal } from '../records.ts';
import type { Pg } from './open.ts';

export async function dailyTotals(db: Pg, q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }): Promise<DailyTotal[]> {
  // the ledger's day column is the window that took the units, so a refund lands on the
  // day of its charge. Entries the ledger pruner removed live on in ledger_pruned, whose 'day'
  // rows hold each day's net units: counted as charged (refunded when below zero). Read from
  // the ledger alone, a pruned day vanished from the chart, and a day whose charge was pruned
  // before its later refund read -1 (LMDB keeps its day totals apart, split and unpruned).
  const values: unknown[] = [q.fromDay, q.toDay];
  const filters: string[] = [];
  if (q.token_id !== undefined) filters.push(`token_id = $${values.push(q.token_id)}`);
  if (q.module_id !== undefined) filters.push(`module_id = $${values.push(q.module_id)}`);
  const and = filters.map((f) => ` AND ${f}`).join('');
  const rows = (
    await db.q(
      `SELECT day, sum(c)::bigint AS c, sum(r)::bigint AS r FROM (
         SELECT day, CASE kind WHEN 'charge' THEN units ELSE 0 END AS c, CASE kind WHEN 'refund' THEN units ELSE 0 END AS r
           FROM ledger WHERE day >= $1 AND day <= $2${and}
         UNION ALL
         SELECT win AS day, greatest(units, 0) AS c, greatest(-units, 0) AS r
           FROM ledger_pruned WHERE period = 'day' AND win >= $1 AND win <= $2${and}
       ) x GROUP BY day`,
      values,
    )
  ).rows;
  const sums = new Map(rows.map((r) => [r.day as string, [Number(r.c), Number(r.r)] as const]));
  return dayTotals(q.fromDay, q.toDay, sums);
}
