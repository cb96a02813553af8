import type pg from 'pg';
import { addressKey, countFailure, KNOWN_ADDRESS_MS, nameKey, nameLive, pairKey, throttleName, throttleWait, WINDOW_MS, windowLive, type AttemptReservation, type AttemptSuccess, type FailureCount, type ThrottleView } from '../throttle-rules.ts';
import type { Pg } from './open.ts';

// The login throttle (rules in throttle-rules.ts): the counts are shared by every node, so N
// nodes never allow N times the attempts.

export async function readThrottle(db: Pg, address: string, username: string, at: number): Promise<ThrottleView> {
  const rows = (
    await db.q(
      `SELECT key, count, window_start, last_failure, NULL::bigint AS known FROM login_throttle WHERE key = ANY($1)
       UNION ALL SELECT 'known', 0, 0, 0, at_ms FROM login_known WHERE name = $2 AND address = $3`,
      [[addressKey(address), pairKey(address, username), nameKey(username)], throttleName(username), address],
    )
  ).rows;
  const get = (k: string) => {
    const r = rows.find((x) => x.key === k);
    // count 0: a row made by a refused attempt's lock, or given back by a success: no count
    return r && r.count > 0 ? ({ count: r.count, window_start: r.window_start, last_failure: r.last_failure } as FailureCount) : undefined;
  };
  const known = rows.find((x) => x.key === 'known');
  return { address: get(addressKey(address)), pair: get(pairKey(address, username)), name: get(nameKey(username)), known: known !== undefined && at - (known.known as number) < KNOWN_ADDRESS_MS };
}

export async function reserveLoginAttempt(db: Pg, address: string, username: string, at: number): Promise<AttemptReservation> {
  // the same transaction as a failure, deciding under the row locks: concurrent attempts
  // (on any node) queue on the three rows, so each sees the counts of those before it
  return throttleTx(db, address, username, async (c) => {
    const counts = await lockThrottleRows(c, address, username);
    const known = (await c.query('SELECT at_ms FROM login_known WHERE name = $1 AND address = $2', [throttleName(username), address])).rows[0];
    const view: ThrottleView = {
      address: counts.get(addressKey(address)),
      pair: counts.get(pairKey(address, username)),
      name: counts.get(nameKey(username)),
      known: known !== undefined && at - (known.at_ms as number) < KNOWN_ADDRESS_MS,
    };
    const wait = throttleWait(view, at);
    if (wait === 0) await countOneFailure(c, counts, address, username, at);
    return { wait, known: view.known };
  });
}

export async function releaseLoginAttempt(db: Pg, address: string, username: string, reservedAt: number) {
  const keys = [addressKey(address), pairKey(address, username), nameKey(username)];
  // a count given back to 0 stays as a row with count 0, which reads as no count
  await throttleTx(db, address, username, async (c) => {
    await lockOrdered(c, keys);
    await c.query('UPDATE login_throttle SET count = count - 1 WHERE key = ANY($1) AND count > 0 AND window_start <= $2', [keys, reservedAt]);
  });
}

export async function recordLoginFailure(db: Pg, address: string, username: string, at: number) {
  await throttleTx(db, address, username, async (c) => countOneFailure(c, await lockThrottleRows(c, address, username), address, username, at));
}

/** The address, pair and name rows, made first and locked in key order, so concurrent
 * attempts count one by one; a row with count 0 is one just made (no count). */
export async function lockThrottleRows(c: pg.PoolClient, address: string, username: string): Promise<Map<string, FailureCount>> {
  const keys = [addressKey(address), pairKey(address, username), nameKey(username)];
  await c.query(`INSERT INTO login_throttle (key, count, window_start, last_failure) SELECT k, 0, 0, 0 FROM unnest($1::text[]) k ORDER BY k ON CONFLICT DO NOTHING`, [keys]);
  const rows = (await c.query('SELECT key, count, window_start, last_failure FROM login_throttle WHERE key = ANY($1) ORDER BY key FOR UPDATE', [keys])).rows;
  return new Map(rows.filter((r) => r.count > 0).map((r) => [r.key as string, { count: r.count, window_start: r.window_start, last_failure: r.last_failure } as FailureCount]));
}

export async function countOneFailure(c: pg.PoolClient, counts: Map<string, FailureCount>, address: string, username: string, at: number): Promise<void> {
  for (const [k, live] of [
    [addressKey(address), windowLive],
    [pairKey(address, username), windowLive],
    [nameKey(username), nameLive],
  ] as const) {
    const f = counts.get(k);
    const next = countFailure(f, live(f, at), at);
    // written whether or not the row is still there: a sweep may have deleted it, stale, after
    // lockThrottleRows's INSERT found it (a conflict takes no lock) and before its locking
    // read; the read then found no count, as the stale row would have counted as none
    await c.query(
      'INSERT INTO login_throttle (key, count, window_start, last_failure) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET count = EXCLUDED.count, window_start = EXCLUDED.window_start, last_failure = EXCLUDED.last_failure',
      [k, next.count, next.window_start, next.last_failure],
    );
  }
}

export async function recordLoginSuccess(db: Pg, address: string, username: string, at: number, success: AttemptSuccess = {}) {
  // the pair and name cleared, the address known, and the address count less this
  // attempt's reservation unless its window started after it (login-throttle.ts); the rows
  // are locked in key order first, as every throttle write does, so that a success and
  // concurrent attempts queue instead of deadlocking
  await throttleTx(db, address, username, async (c) => {
    await lockOrdered(c, [addressKey(address), pairKey(address, username), nameKey(username)]);
    await c.query('DELETE FROM login_throttle WHERE key = ANY($1)', [[pairKey(address, username), nameKey(username)]]);
    if (success.reservedAt !== undefined) {
      await c.query('UPDATE login_throttle SET count = count - 1 WHERE key = $1 AND count > 0 AND window_start <= $2', [addressKey(address), success.reservedAt]);
    }
    await c.query(
      'INSERT INTO login_known (name, address, at_ms) VALUES ($1, $2, $3) ON CONFLICT (name, address) DO UPDATE SET at_ms = EXCLUDED.at_ms',
      [throttleName(username), address, at],
    );
  });
}

/** Locks the existing rows of `keys` in key order (the order every throttle write uses). */
export async function lockOrdered(c: pg.PoolClient, keys: string[]): Promise<void> {
  await c.query('SELECT key FROM login_throttle WHERE key = ANY($1) ORDER BY key FOR UPDATE', [keys]);
}

/** Rows one statement of the sweep deletes at most: a spray's tens of thousands of stale counts
 * go in several short statements, none holding a long run of row locks. */
const SWEEP_BATCH = 1000;

/** Deletes counts that no longer matter and known addresses past their time (the LMDB store's
 * sweepFailures; each node runs it once a minute, src/startup.ts). Staleness is judged in the
 * statement, on rows it locks (FOR UPDATE SKIP LOCKED, as the pruners take theirs), not read
 * first and deleted by key afterwards, which could delete a count an attempt had renewed in
 * between: a row an attempt holds is skipped (it is being renewed), nodes sweeping at once take
 * different rows, and an attempt that comes for a row the sweep holds waits, finds it gone and
 * counts afresh (countOneFailure writes it back), as the stale count would have counted. The
 * rules are throttle-rules.ts's windowLive (address and pair counts: their window from its
 * first failure) and nameLive (a name's count: from its last failure), negated, with its
 * WINDOW_MS and KNOWN_ADDRESS_MS; the store contract holds both stores to the same edges. */
export async function sweepLoginThrottle(db: Pg, at: number) {
  // a count stamped more than a window after `at` (the clock was stepped back) is stale too:
  // windowLive and nameLive forget it (throttle-rules.ts stampedAhead says why)
  const age = `(CASE WHEN key LIKE 'user:%' THEN $1::bigint - last_failure ELSE $1::bigint - window_start END)`;
  const stale = `(${age} >= $2::bigint OR ${age} < -$2::bigint)`;
  for (;;) {
    const { rowCount } = await db.q(`DELETE FROM login_throttle WHERE key IN (SELECT key FROM login_throttle WHERE ${stale} LIMIT $3 FOR UPDATE SKIP LOCKED) AND ${stale}`, [at, WINDOW_MS, SWEEP_BATCH]);
    if ((rowCount ?? 0) < SWEEP_BATCH) break;
  }
  for (;;) {
    const { rowCount } = await db.q(
      'DELETE FROM login_known WHERE (name, address) IN (SELECT name, address FROM login_known WHERE at_ms <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) AND at_ms <= $1',
      [at - KNOWN_ADDRESS_MS, SWEEP_BATCH],
    );
    if ((rowCount ?? 0) < SWEEP_BATCH) break;
  }
}

/** One throttle transaction. It first takes transaction-scoped advisory locks on its address
 * and its name, in one order: two transactions that could touch the same rows (an address row,
 * a pair row, a name row) share one of these locks and so run one after the other. Without
 * them, a success deleting rows that concurrent attempts were re-creating (INSERT ... ON
 * CONFLICT) while others locked them let PostgreSQL find deadlocks: 54 of 1,800 mixed
 * operations on one address over 8 connections. A deadlock victim is still run again, as
 * its transaction was rolled back whole. */
async function throttleTx<T>(db: Pg, address: string, username: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const locks = [`lv_throttle_address:${address}`, `lv_throttle_name:${throttleName(username)}`];
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.tx(async (c) => {
        // ordered in a subquery, so the locks are taken in that order
        await c.query('SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) k ORDER BY h) s', [locks]);
        return fn(c);
      });
    } catch (err) {
      if (attempt < 5 && (err as { code?: unknown }).code === '40P01') continue;
      throw err;
    }
  }
}
