import { dayTotals } from '../periods.ts';
import type { DailyTotal } from '../records.ts';
import type { Pg } from './open.ts';

export async function dailyTotals(db: Pg, q: { fromDay: string; toDay: string; token_id?: string; module_id?: string }): Promise<DailyTotal[]> {
  // the ledger's day column is the window that took the units, so a refund lands on the
  // day of its charge
  const values: unknown[] = [q.fromDay, q.toDay];
  const where = ['day >= $1', 'day <= $2'];
  if (q.token_id !== undefined) where.push(`token_id = $${values.push(q.token_id)}`);
  if (q.module_id !== undefined) where.push(`module_id = $${values.push(q.module_id)}`);
  const rows = (
    await db.q(
      `SELECT day, sum(CASE kind WHEN 'charge' THEN units ELSE 0 END)::bigint AS c, sum(CASE kind WHEN 'refund' THEN units ELSE 0 END)::bigint AS r
       FROM ledger WHERE ${where.join(' AND ')} GROUP BY day`,
      values,
    )
  ).rows;
  const sums = new Map(rows.map((r) => [r.day as string, [Number(r.c), Number(r.r)] as const]));
  return dayTotals(q.fromDay, q.toDay, sums);
}
