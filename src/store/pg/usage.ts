import { resetAt, windowKey } from '../periods.ts';
import { remainingUnits } from '../quota.ts';
import type { TokenRecord, UsageRecord } from '../records.ts';
import { isoOf, type Pg } from './open.ts';

export function windowsOf(at: number) {
  const rd = resetAt('day', at)!;
  const rm = resetAt('month', at)!;
  return { day: windowKey('day', at), month: windowKey('month', at), resetDay: isoOf(rd), resetMonth: isoOf(rm) };
}

export async function usageSnapshot(db: Pg, token: TokenRecord, at: number): Promise<UsageRecord[]> {
  const w = windowsOf(at);
  const keys = token.grants.map((g) => [g.module_id, g.period, windowKey(g.period, at)]);
  const rows = (
    await db.q(
      `SELECT k.m, coalesce(c.used, 0) AS used FROM jsonb_to_recordset($2::jsonb) AS k(m text, p text, w text)
         LEFT JOIN counters c ON c.token_id = $1 AND c.module_id = k.m AND c.period = k.p AND c.win = k.w`,
      [token.id, JSON.stringify(keys.map(([m, p, win]) => ({ m, p, w: win })))],
    )
  ).rows;
  const used = new Map(rows.map((r) => [r.m as string, r.used as number]));
  return token.grants.map((g) => {
    const u = used.get(g.module_id) ?? 0;
    return {
      module_id: g.module_id,
      limit: g.limit,
      period: g.period,
      used: u,
      remaining: remainingUnits(g.limit, u),
      reset_at: g.period === 'day' ? w.resetDay : g.period === 'month' ? w.resetMonth : null,
    };
  });
}
