import { lmdbWrite } from './atomic.ts';
import type { Store } from './open.ts';
import type { IdempotencyRecord, Reservation } from '../records.ts';

/** Completed idempotency records are kept at least the retention, then pruned; settled
 * reservations go with them. Pending ones are never pruned. */
export async function pruneIdempotency(store: Store, at: number, retentionHours: number): Promise<number> {
  const cutoff = at - retentionHours * 3600_000;
  let pruned = 0;
  await lmdbWrite(store, 'retention', store.db.idempotency.transaction(() => {
    for (const { key, value } of store.db.idempotency.getRange({})) {
      const rec = value as IdempotencyRecord;
      if (rec.state === 'completed' && rec.completed_at !== null && Date.parse(rec.completed_at) < cutoff) {
        // `void`: part of the transaction, whose commit lmdbWrite reports
        void store.db.idempotency.remove(key);
        pruned++;
      }
    }
    for (const { key, value } of store.db.reservations.getRange({})) {
      const r = value as Reservation;
      if ((r.state === 'charged' || r.state === 'refunded') && r.settled_at !== null && Date.parse(r.settled_at) < cutoff) void store.db.reservations.remove(key);
    }
  }));
  return pruned;
}
