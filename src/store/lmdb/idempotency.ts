import type { Store } from './open.ts';
import { noteExpiry, pruneExpired } from './expiry.ts';
import type { IdempotencyRecord, Reservation } from '../records.ts';

// Idempotency keys (contract "Idempotency"): a key is bound (pending) with the reservation
// that admits its first call, completed with the exact answer when that call settles (and
// replayed byte for byte), released when its units go back, and pruned once completed and
// older than the retention. Every function but the pruning writes inside the caller's
// transaction (reserve.ts, settle.ts), which decides when.
//
// `void` on a write inside a transaction: the write is part of it, and the transaction's
// commit reports its failure; the write's own promise settles with that commit.

type KeyOf = [tokenId: string, key: string];

/** The record of `key`, read inside the caller's write transaction. */
export function findKey(store: Store, tokenId: string, key: string): IdempotencyRecord | undefined {
  return store.db.idempotency.get([tokenId, key] satisfies KeyOf);
}

/** Binds the reservation's key (pending) for requests with the same `fingerprint`. */
export function bindKey(store: Store, r: Reservation, fingerprint: string): void {
  if (r.idempotency_key === null) return;
  void store.db.idempotency.put([r.token_id, r.idempotency_key] satisfies KeyOf, {
    token_id: r.token_id,
    key: r.idempotency_key,
    state: 'pending',
    fingerprint,
    request_id: r.request_id,
    reservation_id: r.id,
    created_at: r.created_at,
    completed_at: null,
    status: null,
    body: null,
  } satisfies IdempotencyRecord);
}

/** Completes the reservation's key with the answer a retry will replay. */
export function completeKey(store: Store, r: Reservation, iso: string, body: string): void {
  if (r.idempotency_key === null) return;
  const k: KeyOf = [r.token_id, r.idempotency_key];
  const rec = store.db.idempotency.get(k)!;
  void store.db.idempotency.put(k, { ...rec, state: 'completed', completed_at: iso, status: 200, body });
  noteExpiry(store, 'idempotency', iso, k);
}

/** Releases the key of a reservation whose units went back, so the same key may be retried;
 * a key already bound to another call, or completed, stays. */
export function releaseKey(store: Store, r: Reservation): void {
  if (r.idempotency_key === null) return;
  const k: KeyOf = [r.token_id, r.idempotency_key];
  const rec = store.db.idempotency.get(k);
  if (rec && rec.reservation_id === r.id && rec.state === 'pending') void store.db.idempotency.remove(k);
}

/** An operator charged a settlement_failed reservation: its key replays the answer kept on
 * it, or, with none kept, is released (the retry runs afresh). */
export function resolveKey(store: Store, r: Reservation, iso: string): void {
  if (r.idempotency_key === null) return;
  const k: KeyOf = [r.token_id, r.idempotency_key];
  const rec = store.db.idempotency.get(k);
  if (!rec || rec.reservation_id !== r.id) return;
  if (r.unsaved_body === null) {
    void store.db.idempotency.remove(k);
    return;
  }
  void store.db.idempotency.put(k, { ...rec, state: 'completed', completed_at: iso, status: 200, body: r.unsaved_body });
  noteExpiry(store, 'idempotency', iso, k);
}

/** Completed idempotency records are kept at least the retention, then pruned; settled
 * reservations go with them. Pending ones are never pruned. Found through the expiry index and
 * removed in short batches (expiry.ts): never a read of the whole tree. */
export async function pruneIdempotency(store: Store, at: number, retentionHours: number): Promise<number> {
  const cutoff = at - retentionHours * 3600_000;
  const pruned = await pruneExpired(store, 'idempotency', store.db.idempotency, cutoff);
  await pruneExpired(store, 'reservations', store.db.reservations, cutoff);
  return pruned;
}
