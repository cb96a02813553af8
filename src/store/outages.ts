// The store's outages as this thread saw them (PostgreSQL: no writable host answered, then one
// did: a restart, or a failover to a promoted standby, src/store/pg/hosts.ts), for the metrics
// (src/observability/metrics.ts), which import the store's surface but must not load `pg`.
// Each thread has its own pool, so each sees the outage; the metrics merge them (max, min).

export interface StoreRecovery {
  /** from the first failure this thread met to its first connection to a writable host */
  seconds: number;
  host: string;
  previous: string | null;
}

const listeners: ((r: StoreRecovery) => void)[] = [];
let downSince: number | null = null;
let recoveries = 0;
let lastRecovery: StoreRecovery | null = null;

export function noteStoreDown(at = Date.now()): void {
  downSince ??= at;
}

export function noteStoreRecovered(r: StoreRecovery): void {
  downSince = null;
  recoveries++;
  lastRecovery = r;
  for (const fn of listeners) fn(r);
}

export function onStoreRecovered(fn: (r: StoreRecovery) => void): void {
  listeners.push(fn);
}

/** since when this thread's store has had no writable host, or null */
export function storeDownSince(): number | null {
  return downSince;
}

export function storeRecoveries(): { count: number; last: StoreRecovery | null } {
  return { count: recoveries, last: lastRecovery };
}
