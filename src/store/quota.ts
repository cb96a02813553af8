import type { ModuleId } from '../contract/index.ts';
import type { Grant } from './records.ts';
import { secondsUntilReset } from './periods.ts';

/** A reservation refused by the quota rule: what the caller is told, and when the window
 * resets (null for a cumulative quota, which never does). */
export interface QuotaExceeded {
  kind: 'quota_exceeded';
  message: string;
  retryAfterSeconds: number | null;
}

/** The quota rule, shared by every store: null when `units` more fit in the grant's window
 * that already holds `used`, else the refusal (whole seconds to the window's reset for day and
 * month, none for never). */
export function quotaRefusal(moduleId: ModuleId, grant: Grant, used: number, units: number, at: number): QuotaExceeded | null {
  if (grant.limit === null || used + units <= grant.limit) return null;
  const available = Math.max(0, grant.limit - used);
  const quota = `The ${grant.period === 'never' ? 'cumulative' : grant.period === 'day' ? 'daily' : 'monthly'} quota of ${moduleId}`;
  // a batch larger than the whole quota would fail after the reset too: say so
  const tooBig = units > grant.limit ? `; that is more than the whole quota of ${grant.limit}, so split the batch` : '';
  return {
    kind: 'quota_exceeded',
    message: `${quota} has ${available} unit(s) left; this request needs ${units}${tooBig}`,
    retryAfterSeconds: secondsUntilReset(grant.period, at),
  };
}

/** What a caller's usage reports as left of a grant: none past the limit, null when unlimited. */
export function remainingUnits(limit: number | null, used: number): number | null {
  return limit === null ? null : Math.max(0, limit - used);
}
