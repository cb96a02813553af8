import { currentProcess, holderAlive } from '../owner.ts';
import { readLatest, type Store } from './open.ts';
import type { Reservation } from '../records.ts';
import { refund } from './settle.ts';
import { scanChunks } from './prune-scan.ts';
import { heldIndexed, rebuildHeld } from './held.ts';
import { forgetExpiryIndex } from './expiry.ts';

/** Refunds the pending reservations whose process is gone (a reservation names its process,
 * owner.ts) and releases their keys. Recovery runs before this process serves, so a
 * reservation of our own pid is a previous run's; one whose holder still runs (another
 * process on the same store) is in flight and stays. One of another PID namespace counts as
 * gone (owner.ts holderAlive): this server holds DATA_DIR's mark, so it is an earlier run's,
 * a container's that was started again. The pending
 * ones are read from their index (held.ts); a store another build wrote is read whole once,
 * and its indexes rebuilt. */
export async function recoverPending(store: Store, at: number): Promise<Reservation[]> {
  if (!heldIndexed(store)) return recoverReadingAll(store, at);
  const done: Reservation[] = [];
  for (const r of pendingOnes(store)) {
    if (holderAlive(r)) continue;
    const after = await refund(store, r.id, at);
    // refund is idempotent: only what this call gave back is reported
    if (after?.state === 'refunded' && after.settled_at === new Date(at).toISOString()) done.push(r);
  }
  return done;
}

/** The pending reservations, through their index, as of the latest commit. */
function pendingOnes(store: Store): Reservation[] {
  readLatest(store);
  const out: Reservation[] = [];
  for (const id of store.db.pendingReservations.getKeys({})) {
    const r = store.db.reservations.get(id);
    if (r?.state === 'pending') out.push(r);
  }
  return out;
}

/** Recovery on a store whose indexes do not hold every reservation (written before them, or by
 * another build since): every reservation is read, in chunks, the dead holders' pending ones
 * refunded, and both indexes rebuilt from the same read; the expiry index is built again too. */
async function recoverReadingAll(store: Store, at: number): Promise<Reservation[]> {
  readLatest(store);
  const done: Reservation[] = [];
  const pending: string[] = [];
  const failed: string[] = [];
  for await (const { value: r } of scanChunks(store.db.reservations)) {
    if (r.state === 'settlement_failed') failed.push(r.id);
    if (r.state !== 'pending') continue;
    if (holderAlive(r)) {
      pending.push(r.id);
      continue;
    }
    const after = await refund(store, r.id, at);
    if (after?.state === 'refunded' && after.settled_at === new Date(at).toISOString()) done.push(r);
  }
  await rebuildHeld(store, pending, failed);
  // the same other build wrote settled keys, reservations and results without expiry entries:
  // the next pass of each pruner reads its tree once and indexes them (expiry.ts)
  await forgetExpiryIndex(store);
  return done;
}

/** Refunds the pending reservations of API worker `thread` of this process, which has exited
 * (src/cluster/cluster.ts replaces it without a restart), and releases their keys. Only that thread's are
 * touched: the live workers' reservations name the same process but another thread, and
 * recoverPending cannot tell them apart (holderAlive says the process runs). The dead thread
 * runs no more JavaScript, so none of these can be settled meanwhile; a settlement it had
 * already committed left the reservation settled, and refund() skips it. The reservations it
 * made are indexed (this build made them, after the start's recovery built the index). */
export async function recoverThread(store: Store, thread: number, at: number): Promise<Reservation[]> {
  const self = currentProcess();
  const done: Reservation[] = [];
  for (const r of pendingOnes(store)) {
    if (r.thread !== thread || r.pid !== self.pid || (r.pid_start ?? null) !== self.pid_start) continue;
    const after = await refund(store, r.id, at);
    if (after?.state === 'refunded' && after.settled_at === new Date(at).toISOString()) done.push(r);
  }
  return done;
}

/** What a restored store's pending reservations name as their holder's start time: no process
 * has it, so holderAlive is false for them and the first start on the restored DATA_DIR
 * refunds them and frees their keys. They name the processes of the store the backup was made
 * from, and such a process may still run on this host (a backup restored into another DATA_DIR
 * beside the service it was taken from): their calls were in flight then and are not in this
 * store's future, so nothing here will ever settle them. Before, they stayed pending, their
 * keys answering 409 request_in_progress for ever. */
export const RESTORED_HOLDER = 'restored';

/** Marks every pending reservation of `store` (a restore's copy, before it takes the store's
 * place) as held by no process; returns how many. */
export function orphanPending(store: Store): number {
  let n = 0;
  store.root.transactionSync(() => {
    // the ids first (no write under a live cursor), and only the ids: a store without the pending
    // index is read once, not held whole in memory
    const ids: string[] = [];
    if (heldIndexed(store)) for (const id of store.db.pendingReservations.getKeys({})) ids.push(id);
    else for (const { key, value } of store.db.reservations.getRange({})) if (value.state === 'pending') ids.push(key);
    for (const id of ids) {
      const r = store.db.reservations.get(id);
      if (r?.state !== 'pending') continue;
      void store.db.reservations.put(id, { ...r, pid_start: RESTORED_HOLDER });
      n++;
    }
  });
  return n;
}
