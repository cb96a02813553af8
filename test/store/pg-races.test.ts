import t, { type Test } from 'tap';
import pg from 'pg';
import { PgBackend } from '../../src/store/pg/index.ts';
import { windowKey } from '../../src/store/periods.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { waitFor } from '../helpers/wait.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';

// Races between nodes on one PostgreSQL that a review found (2026-11-30), each made to happen
// every time: a transaction of the test holds the rows a rule waits for, and the test lets go
// once the rule's backend is seen waiting (pg_stat_activity), never after a sleep.
const server = await startPostgres();
t.teardown(() => server.stop());

async function client(url = server.url): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return c;
}

/** Waits until `n` backends wait for a row lock on the metering tables. */
async function lockWaiters(c: pg.Client, n: number): Promise<void> {
  await waitFor(async () => {
    const r = await c.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lv_%'`);
    return r.rows[0].n >= n || null;
  }, { what: `${n} rule(s) waiting for a lock`, timeoutMs: 30_000, intervalMs: 5 });
}

/** Two nodes on the server's database, closed after the test. */
async function twoNodes(t: Test) {
  const a = await PgBackend.open(server.url);
  const b = await PgBackend.open(server.url);
  t.teardown(() => Promise.all([a.close(), b.close()]));
  return { a, b };
}

/** Two plain connections of the test (one holds rows, one looks), closed after it. */
async function twoClients(t: Test, url = server.url) {
  const c1 = await client(url);
  const c2 = await client(url);
  t.teardown(() => Promise.all([c1.end(), c2.end()]));
  return { c1, c2 };
}

const counterKeys = (tokenId: string) => [
  [tokenId, 'rgb_liveness', 'day', windowKey('day', T0)],
  [tokenId, 'rgb_liveness', 'month', windowKey('month', T0)],
  [tokenId, 'rgb_liveness', 'never', 'all'],
] as const;

t.test('a refund locks the token\'s counter rows in the reservation\'s order (day, month, never): the two cannot deadlock', async (t) => {
  // no index scans: on a counters table of production size the refund's UPDATE is planned as a
  // bitmap heap scan, which takes the rows in the order they lie on disk; on this small table
  // the planner would walk the unique index instead, in day, month, never order by chance
  const url = await server.database('lock_order');
  const admin = await client(url);
  await admin.query('ALTER DATABASE lock_order SET enable_indexscan = off');
  await admin.end();
  const store = await PgBackend.open(url);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await store.insertToken(tok);
  const out = await store.reserve(reserveInput(tok));
  if (out.kind !== 'reserved') throw new Error('not reserved');
  const { c1, c2 } = await twoClients(t, url);
  // the day row written again: it now lies after month's and never's on disk (a new tuple,
  // not a HOT version, whose index entry would still point at its old place), the order a
  // plain UPDATE of the three takes them in, as ordinary traffic leaves rows anywhere
  await c1.query(`WITH d AS (DELETE FROM counters WHERE token_id = $1 AND period = 'day' RETURNING *) INSERT INTO counters SELECT * FROM d`, [tok.id]);
  // a reservation of the token holds the day row (it takes day first)
  await c1.query('BEGIN');
  await c1.query(`SELECT 1 FROM counters WHERE token_id = $1 AND period = 'day' FOR UPDATE`, [tok.id]);
  const refund = store.refund(out.reservation.id, T0 + 1);
  await lockWaiters(c2, 1);
  // while the refund waits for day, it holds neither month nor never, which the reservation
  // takes next: before, it had locked both and waited for day, a deadlock
  await c2.query('BEGIN');
  const never = await c2.query(`SELECT 1 FROM counters WHERE token_id = $1 AND period IN ('month', 'never') FOR UPDATE NOWAIT`, [tok.id]).then(() => 'free', (e: { code?: string }) => e.code);
  await c2.query('ROLLBACK');
  t.equal(never, 'free', 'the refund waits for day holding nothing else (55P03 lock_not_available: it held month and never)');
  await c1.query('COMMIT');
  t.match(await refund, { id: out.reservation.id, state: 'refunded' });
  t.ok((await store.verifyLedger()).ok);
});

t.test('a pending reservation whose node row is gone is swept like one whose lease lapsed', async (t) => {
  const { a, b } = await twoNodes(t);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 1, period: 'never' }]);
  await a.insertToken(tok);
  const out = await a.reserve(reserveInput(tok, { idempotencyKey: 'k-orphan', fingerprint: 'fp' }));
  if (out.kind !== 'reserved') throw new Error('not reserved');
  // what close() does once it sees nothing pending, with the reservation committing just after
  // that check (or the hourly cleanup of nodes long dead): the node's row is gone
  await b.pool.query('DELETE FROM nodes WHERE id = $1', [a.node]);
  const swept = await b.recoverPending(T0 + 1);
  t.same(swept.map((r) => r.id), [out.reservation.id], 'refunded by the sweep (it found nothing: the reservation stayed pending for ever)');
  t.equal((await b.getReservation(out.reservation.id))!.state, 'refunded');
  t.equal((await b.reserve(reserveInput(tok, { idempotencyKey: 'k-orphan', fingerprint: 'fp', at: T0 + 2 }))).kind, 'reserved', 'the key is free again (it answered 409 on every node)');
  t.ok((await b.verifyLedger()).ok);
});

t.test('the same key on two nodes at once, the quota room for one: the second hears 409, not 429', async (t) => {
  const { a, b } = await twoNodes(t);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 1, period: 'never' }]);
  await a.insertToken(tok);
  const { c1, c2 } = await twoClients(t);
  for (const k of counterKeys(tok.id)) await c1.query('INSERT INTO counters (token_id, module_id, period, win, used) VALUES ($1, $2, $3, $4, 0)', [...k]);
  // both calls look their key up (nobody has it yet), then wait for the counters
  await c1.query('BEGIN');
  await c1.query(`SELECT 1 FROM counters WHERE token_id = $1 AND period = 'day' FOR UPDATE`, [tok.id]);
  const both = [a, b].map((n) => n.reserve(reserveInput(tok, { idempotencyKey: 'k-same', fingerprint: 'fp' })));
  await lockWaiters(c2, 2);
  await c1.query('COMMIT');
  const kinds = (await Promise.all(both)).map((o) => o.kind).sort();
  t.same(kinds, ['request_in_progress', 'reserved'], 'one admitted; the other is the same call in progress (it was told quota_exceeded, its Retry-After the reset)');
  t.same((await a.usageSnapshot(tok, T0)).map((u) => u.used), [1], 'charged once');
});

t.test('a statement a deadlock aborted runs again: the refund that lost one still refunds', async (t) => {
  const store = await PgBackend.open(server.url);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await store.insertToken(tok);
  const out = await store.reserve(reserveInput(tok));
  if (out.kind !== 'reserved') throw new Error('not reserved');
  const { c1, c2 } = await twoClients(t);
  // this side waits longest before looking for a deadlock: the refund is the one aborted
  await c1.query(`SET deadlock_timeout = '20s'`);
  await c1.query('BEGIN');
  await c1.query(`SELECT 1 FROM counters WHERE token_id = $1 AND period = 'day' FOR UPDATE`, [tok.id]);
  const refund = store.refund(out.reservation.id, T0 + 1); // holds the reservation's row, waits for day
  await lockWaiters(c2, 1);
  const cycle = c1.query('UPDATE reservations SET state = state WHERE id = $1', [out.reservation.id]); // waits for the refund: a deadlock
  await cycle; // the refund's statement was aborted (40P01), which freed the row
  await c1.query('COMMIT');
  t.match(await refund, { id: out.reservation.id, state: 'refunded' }, 'run again, it refunded (it threw deadlock_detected: the units stayed held, the key pending)');
  t.ok((await store.verifyLedger()).ok);
  t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [0]);
});

t.test('a node whose lease lapsed (an outage longer than it) reserves under a new id, and its call settles', async (t) => {
  const { a, b } = await twoNodes(t);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await a.insertToken(tok);
  const lapsed = a.node;
  // what the outage left: the lease ran out in the database, and this node knows it was not renewed
  await b.pool.query(`UPDATE nodes SET lease_until = now() - interval '1 second' WHERE id = $1`, [lapsed]);
  (a as unknown as { db: { leaseOkUntil: number } }).db.leaseOkUntil = performance.now() - 1;
  const out = await a.reserve(reserveInput(tok, { at: Date.now() }));
  if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
  t.not(out.reservation.node, lapsed, 'the reservation names the node registered anew, not the lapsed one');
  t.equal(out.reservation.node, a.node);
  // another node's sweep, as it runs while the call is in inference: nothing of this call is its
  t.same((await b.recoverPending(Date.now())).map((r) => r.id), [], 'the sweep leaves it (it refunded the call, whose settlement was then refused: a 500 for a call whose inference had worked)');
  const settled = await a.settle(out.reservation, Date.now(), (usage) => JSON.stringify({ usage }), [{ ok: 1 }]);
  t.equal(settled.kind, 'settled');
  t.ok((await a.verifyLedger()).ok);
});

t.test('a node that cannot renew its lapsed lease refuses the reservation: store_unavailable, nothing written', async (t) => {
  const store = await PgBackend.open(server.url);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await store.insertToken(tok);
  const db = (store as unknown as { db: { leaseOkUntil: number; pool: { query: unknown } } }).db;
  db.leaseOkUntil = performance.now() - 1;
  // the database answers no lease query (an outage that goes on): the renewal fails
  const query = store.pool.query.bind(store.pool);
  (store.pool as { query: unknown }).query = (text: unknown, ...rest: unknown[]) => (typeof text === 'string' && /nodes/.test(text) ? Promise.reject(new Error('connection refused')) : (query as (...a: unknown[]) => unknown)(text, ...rest));
  await t.rejects(store.reserve(reserveInput(tok, { at: Date.now() })), { name: 'StoreUnavailableError' });
  (store.pool as { query: unknown }).query = query;
  t.same((await store.usageSnapshot(tok, Date.now())).map((u) => u.used), [0], 'nothing reserved');
});

t.test('two renewals at once (the timer\'s and the one an outage\'s end starts) are one: a lapsed lease registers one new node', async (t) => {
  const { a, b } = await twoNodes(t);
  // an outage outlasted the lease: lapsed in the database, and this node knows it was not renewed
  // (one lapsed only in the database, by a clock step, is renewed as it is: pg-clock-step.test.ts)
  await b.pool.query(`UPDATE nodes SET lease_until = now() - interval '1 second' WHERE id = $1`, [a.node]);
  (a as unknown as { db: { leaseOkUntil: number } }).db.leaseOkUntil = performance.now() - 1;
  const before = (await b.pool.query('SELECT count(*)::int AS n FROM nodes')).rows[0].n as number;
  t.same(await Promise.all([a.renew(), a.renew(), a.renew()]), [true, true, true]);
  const after = (await b.pool.query('SELECT count(*)::int AS n FROM nodes')).rows[0].n as number;
  t.equal(after - before, 1, 'one node registered (each renewal that found the lease lapsed registered its own, and the node could name one while another was committed)');
  t.equal((await b.pool.query('SELECT lease_until > now() AS held FROM nodes WHERE id = $1', [a.node])).rows[0].held, true, 'and its lease is held');
});
