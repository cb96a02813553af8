import { randomBytes } from 'node:crypto';
import { now } from '../../clock.ts';
import type { Pg } from './open.ts';
import { REFUND_SQL, refundArgs, SETTLE_SQL, settleArgs } from './settle.ts';
import type { Reservation } from '../records.ts';

// Settlements answered 200 whose commit the database no longer has: with asynchronous
// replication (or synchronous_commit = local) a promoted standby can lack the last commits of
// the old primary. A reservation that did replicate is then pending there with no call of this
// node holding it, and its key has no answer: a retry would wait on request_in_progress for as
// long as this node lives. After every outage this thread looks for such reservations of its
// own and puts the settlement back with the very answer it gave (the key then replays the same
// bytes, charged once), from the settlements it answered in the last RECENT_MS; one it no
// longer remembers is refunded and its key freed. With synchronous replication none is found.

/** how long an answered settlement is remembered: the replication lag a promotion can lose is
 * far below this */
const RECENT_MS = 30_000;
/** at most this many remembered per thread (a few MB of answers at most) */
const RECENT_MAX = 2_048;
/** a reservation found pending with no call holding it is looked at again this much later:
 * by then a reservation whose call was still being answered by the database (statements are
 * bounded by 12 s) is held, settled or refunded, so only a lost one remains */
const RECHECK_MS = 15_000;

export class RecentSettlements {
  private readonly items = new Map<string, { at: number; args: unknown[] }>();
  /** reservations of this thread's calls in flight (reserved, not yet settled or refunded) */
  readonly held = new Set<string>();

  remember(r: Pick<Reservation, 'id' | 'token_id' | 'module_id'>, at: number, body: string, results: unknown): void {
    // the answer as given: its marker is absent, so lv_settle saves these exact bytes
    const args = settleArgs(r, at, body, `"__none_${randomBytes(12).toString('hex')}__"`, results);
    // the window is a length of this thread's time, not a date: a wall clock stepped forward
    // past it forgot every answer this node could still have to restore after a failover
    this.items.set(r.id, { at: performance.now(), args });
    const old = performance.now() - RECENT_MS;
    for (const [id, item] of this.items) {
      if (item.at >= old && this.items.size <= RECENT_MAX) break;
      this.items.delete(id);
    }
  }

  get(id: string): unknown[] | undefined {
    return this.items.get(id)?.args;
  }
}

export interface LostCommit {
  reservation: string;
  /** restored: settled again with the answer given; refunded: not remembered, key freed */
  outcome: 'restored' | 'refunded';
}

/** Finds this node's pending reservations that no call holds, waits `recheckMs`, and puts back
 * (or refunds) those still in that state. */
export async function restoreLostCommits(db: Pg, recent: RecentSettlements, recheckMs = RECHECK_MS): Promise<LostCommit[]> {
  const orphans = async (among?: string[]) => {
    const rows = (await db.q(
      `SELECT id FROM reservations WHERE node_id = $1 AND state = 'pending'${among ? ' AND id = ANY($2)' : ''}`,
      among ? [db.node, among] : [db.node],
    )).rows;
    return rows.map((r) => r.id as string).filter((id) => !recent.held.has(id) && !db.repairs.has(id));
  };
  const first = await orphans();
  if (first.length === 0) return [];
  await new Promise((r) => setTimeout(r, recheckMs).unref());
  const out: LostCommit[] = [];
  for (const id of await orphans(first)) {
    const args = recent.get(id);
    if (args) {
      const r = (await db.q(SETTLE_SQL, args, 'lv_settle')).rows[0]!.r as { ok: boolean };
      if (r.ok) {
        out.push({ reservation: id, outcome: 'restored' });
        continue;
      }
    }
    const at = now();
    await db.q(REFUND_SQL, refundArgs(id, at));
    out.push({ reservation: id, outcome: 'refunded' });
  }
  return out;
}
