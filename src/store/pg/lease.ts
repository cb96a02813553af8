import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { threadId } from 'node:worker_threads';
import { localNow, setClockOffset } from '../../clock.ts';
import { DB_MS, leaseHeld, type Pg } from './open.ts';
import { REFUND_SQL, refundArgs, resolveSettlement } from './settle.ts';
import { currentProcess } from '../owner.ts';
import { StoreUnavailableError } from '../errors.ts';

// This process as a node of the shared store. Its reservations name the node, and a node
// whose lease lapsed has them refunded by another (recovery.ts): the PostgreSQL counterpart
// of the process identity an LMDB reservation carries (store/owner.ts).

/** Registers this process as a new node with a fresh lease. */
export async function register(db: Pg): Promise<void> {
  const id = `node_${randomBytes(9).toString('base64url')}`;
  // pid, its start time and the thread name this node's holder, so that the process can end the
  // lease of an API worker that died (recovery.ts recoverThread) without waiting for it to lapse;
  // its lease length, so that a sweeper with a shorter one waits this node's (recovery.ts)
  const info = { ...currentProcess(), thread: threadId, host: os.hostname(), lease_ms: db.leaseMs };
  const started = performance.now();
  const local = localNow();
  const r = await db.pool.query(`INSERT INTO nodes (id, info, lease_until) VALUES ($1, $2, now() + $3 * interval '1 millisecond') RETURNING ${DB_MS} AS db_ms`, [id, info, db.leaseMs]);
  followDatabaseClock(local, r.rows[0]!.db_ms);
  db.node = id;
  db.leaseOkUntil = started + db.leaseMs;
}

/** Quota windows and record times follow the database's clock (src/clock.ts): the offset is
 * measured against the midpoint of the round trip, so it is off by at most half of it. */
export function followDatabaseClock(localBefore: number, dbMs: number): void {
  setClockOffset(Math.round(dbMs - (localBefore + localNow()) / 2));
}

/** Extends the lease. A lease found lapsed in the database while this node's own monotonic
 * clock says it was renewed in time (within a lease of the last renewal: open.ts leaseHeld; a
 * step of this host's wall clock changes neither answer) lapsed only by the database's clock
 * stepping forward: it is extended as it is, under the same node id, so the calls in flight
 * that name it settle (no other node takes a lease before it has stayed unrenewed for a whole
 * lease of that node's own time: recovery.ts). A lease this node itself knows it did not renew
 * in time (an outage outlasted it) is not revived (another node may be refunding its
 * reservations): this process registers as a new node for what it reserves next. One renewal
 * at a time: a second caller shares the one in progress. */
export function renew(db: Pg): Promise<boolean> {
  db.renewing ??= renewOnce(db).finally(() => {
    db.renewing = null;
  });
  return db.renewing;
}

/** A lease held for the reservation about to name this node: when it is not known to be held
 * (an outage outlasted it, or its renewal is due and late), it is renewed first, or this node
 * registered anew, and a store that cannot do either refuses the call (503 store_unavailable,
 * before any inference is charged). Before, a call admitted just after an outage longer than
 * the lease reserved under the lapsed node id; the other nodes' sweep refunded it, and its
 * settlement was refused: a 500 inference_failed for a call whose inference had worked. */
export async function leaseForReservation(db: Pg): Promise<void> {
  if (leaseHeld(db)) return;
  await renew(db);
  if (!leaseHeld(db)) throw new StoreUnavailableError('this node\'s lease could not be renewed', db.hosts.outage?.latest);
}

async function renewOnce(db: Pg): Promise<boolean> {
  const started = performance.now();
  const local = localNow();
  const heldHere = started < db.leaseOkUntil;
  try {
    const r = await db.pool.query(
      `WITH renewed AS (UPDATE nodes SET lease_until = now() + $2 * interval '1 millisecond' WHERE id = $1 AND (lease_until > now() OR $3) RETURNING 1)
       SELECT (SELECT count(*)::int FROM renewed) AS renewed, ${DB_MS} AS db_ms`, [db.node, db.leaseMs, heldHere]);
    followDatabaseClock(local, r.rows[0]!.db_ms);
    if (r.rows[0]!.renewed === 1) db.leaseOkUntil = started + db.leaseMs;
    else await register(db);
    await repair(db);
    return true;
  } catch (err) {
    db.onError?.(err as Error);
    return false;
  }
}

/** Makes the writes owed to the database (Pg.repairs), oldest first. */
export async function repair(db: Pg): Promise<void> {
  for (const [id, job] of [...db.repairs]) {
    if (job.kind === 'refund') await db.pool.query(REFUND_SQL, refundArgs(id, job.at));
    else if (job.kind === 'settle') await resolveSettlement(db, id, job);
    else await db.pool.query(`UPDATE reservations SET state = 'settlement_failed', unsaved_body = $2 WHERE id = $1 AND state = 'pending'`, [id, job.body]);
    db.repairs.delete(id);
  }
}

/** Ready only while the database answers and this node's lease is known to be held. */
export async function healthy(db: Pg): Promise<boolean> {
  if (!leaseHeld(db)) return false;
  try {
    await db.pool.query('SELECT 1');
    return true;
  } catch {
    return false;
  }
}
