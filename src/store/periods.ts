import type { DailyTotal, Period } from './records.ts';

// Quota windows (spec, rule 4): day from 00:00 UTC, month from 00:00 UTC on the 1st,
// never cumulative. Every charge is counted in all three windows at once, so a grant whose
// period is changed still sees the usage of the window it now has (spec rule 3).
export const PERIODS: readonly Period[] = ['day', 'month', 'never'];

export function windowKey(period: Period, at: number): string {
  const d = new Date(at);
  const y = d.getUTCFullYear();
  const m = String(d.getUTCMonth() + 1).padStart(2, '0');
  if (period === 'day') return `${y}-${m}-${String(d.getUTCDate()).padStart(2, '0')}`;
  if (period === 'month') return `${y}-${m}`;
  return 'all';
}

/** Start of the next window, or null for never. */
export function resetAt(period: Period, at: number): number | null {
  const d = new Date(at);
  if (period === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
  if (period === 'month') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return null;
}

/** Whole seconds until the window resets (at least 1), for Retry-After on 429. */
export function secondsUntilReset(period: Period, at: number): number | null {
  const r = resetAt(period, at);
  return r === null ? null : Math.max(1, Math.ceil((r - at) / 1000));
}

/** Every UTC day from `fromDay` to `toDay` (both inclusive, YYYY-MM-DD), days without units
 * included, from the [charged, refunded] sums of the days that have some. */
export function dayTotals(fromDay: string, toDay: string, sums: ReadonlyMap<string, readonly [number, number]>): DailyTotal[] {
  const out: DailyTotal[] = [];
  for (let t = Date.parse(`${fromDay}T00:00:00Z`), end = Date.parse(`${toDay}T00:00:00Z`); t <= end; t += 86_400_000) {
    const day = new Date(t).toISOString().slice(0, 10);
    const [charged, refunded] = sums.get(day) ?? [0, 0];
    out.push({ day, charged, refunded, units: charged - refunded });
  }
  return out;
}
