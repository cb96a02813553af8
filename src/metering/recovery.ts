import type { Logger } from '../observability/logger.ts';
import type { Store } from '../store/open.ts';
import type { IdempotencyRecord, Reservation } from './records.ts';
import { holderAlive } from './owner.ts';
import { refund } from './settle.ts';

/** Start-up rule for a crash: a pending reservation whose process is gone never reached
 * settlement (settlement is one transaction), so it is refunded and its key released, and
 * each one is logged. settlement_failed reservations are left for the operator. */
export async function recoverPending(store: Store, at: number, log: Logger): Promise<number> {
  // holder_pid, not pid: pino's own `pid` field names the process that logs the line
  let recovered = 0;
  for (const { value } of store.db.reservations.getRange({})) {
    const r = value as Reservation;
    if (r.state !== 'pending' || holderAlive(r)) continue;
    await refund(store, r.id, at);
    recovered++;
    log.warn({ reservation: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, holder_pid: r.pid, holder_pid_start: r.pid_start ?? null }, 'crash recovery: pending reservation refunded, idempotency key released');
  }
  return recovered;
}

/** Completed idempotency records are kept at least the retention, then pruned; settled
 * reservations go with them. Pending ones are never pruned. */
export async function pruneIdempotency(store: Store, at: number, retentionHours: number): Promise<number> {
  const cutoff = at - retentionHours * 3600_000;
  let pruned = 0;
  await store.db.idempotency.transaction(() => {
    for (const { key, value } of store.db.idempotency.getRange({})) {
      const rec = value as IdempotencyRecord;
      if (rec.state === 'completed' && rec.completed_at !== null && Date.parse(rec.completed_at) < cutoff) {
        store.db.idempotency.remove(key);
        pruned++;
      }
    }
    for (const { key, value } of store.db.reservations.getRange({})) {
      const r = value as Reservation;
      if ((r.state === 'charged' || r.state === 'refunded') && r.settled_at !== null && Date.parse(r.settled_at) < cutoff) store.db.reservations.remove(key);
    }
  });
  return pruned;
}
