import { currentProcess, holderAlive } from '../owner.ts';
import { readLatest, type Store } from './open.ts';
import type { Reservation } from '../records.ts';
import { refund, reindexFailedSettlements } from './settle.ts';

/** Refunds the pending reservations whose process is gone (a reservation names its process,
 * owner.ts) and releases their keys. Recovery runs before this process serves, so a
 * reservation of our own pid is a previous run's; one whose holder still runs (another
 * process on the same store: the CLI, a second service) is in flight and stays. */
export async function recoverPending(store: Store, at: number): Promise<Reservation[]> {
  readLatest(store);
  const done: Reservation[] = [];
  const failed: string[] = [];
  for (const { value } of store.db.reservations.getRange({})) {
    const r = value;
    if (r.state === 'settlement_failed') failed.push(r.id);
    if (r.state !== 'pending' || holderAlive(r)) continue;
    const after = await refund(store, r.id, at);
    // refund is idempotent: only what this call gave back is reported
    if (after?.state === 'refunded' && after.settled_at === new Date(at).toISOString()) done.push(r);
  }
  // the same read, which every start makes, checks the failed settlements' index (settle.ts)
  await reindexFailedSettlements(store, failed);
  return done;
}

/** Refunds the pending reservations of API worker `thread` of this process, which has exited
 * (src/cluster/cluster.ts replaces it without a restart), and releases their keys. Only that thread's are
 * touched: the live workers' reservations name the same process but another thread, and
 * recoverPending cannot tell them apart (holderAlive says the process runs). The dead thread
 * runs no more JavaScript, so none of these can be settled meanwhile; a settlement it had
 * already committed left the reservation settled, and refund() skips it. */
export async function recoverThread(store: Store, thread: number, at: number): Promise<Reservation[]> {
  readLatest(store);
  const self = currentProcess();
  const done: Reservation[] = [];
  let seen = 0;
  for (const { value } of store.db.reservations.getRange({})) {
    // this runs on the main thread while it serves (it relays inference): a day's reservations
    // are scanned a slice at a time, not in one block of its event loop
    if (++seen % 10_000 === 0) await new Promise((resolve) => setImmediate(resolve));
    const r = value;
    if (r.state !== 'pending' || r.thread !== thread || r.pid !== self.pid || (r.pid_start ?? null) !== self.pid_start) continue;
    const after = await refund(store, r.id, at);
    if (after?.state === 'refunded' && after.settled_at === new Date(at).toISOString()) done.push(r);
  }
  return done;
}
