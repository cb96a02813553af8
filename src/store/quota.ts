import { ServiceError } from '../errors/index.ts';
import type { ModuleId } from '../packets/types.ts';
import type { Grant } from './records.ts';
import { secondsUntilReset } from './periods.ts';

/** The quota rule and its answer, shared by every store: null when `units` more fit in the
 * grant's window that already holds `used`, else the 429 to give (Retry-After = seconds to
 * the window's reset for day and month, none for never). */
export function quotaRefusal(moduleId: ModuleId, grant: Grant, used: number, units: number, at: number): ServiceError | null {
  if (grant.limit === null || used + units <= grant.limit) return null;
  const wait = secondsUntilReset(grant.period, at);
  const available = Math.max(0, grant.limit - used);
  const quota = `The ${grant.period === 'never' ? 'cumulative' : grant.period === 'day' ? 'daily' : 'monthly'} quota of ${moduleId}`;
  // a batch larger than the whole quota would fail after the reset too: say so
  const tooBig = units > grant.limit ? `; that is more than the whole quota of ${grant.limit}, so split the batch` : '';
  return new ServiceError(
    'quota_exceeded',
    `${quota} has ${available} unit(s) left; this request needs ${units}${tooBig}`,
    wait === null ? {} : { 'Retry-After': String(wait) },
  );
}
