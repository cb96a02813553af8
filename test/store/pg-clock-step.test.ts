import t, { type Test } from 'tap';
import { PgBackend } from '../../src/store/pg/index.ts';
import type { Reservation } from '../../src/store/records.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken } from '../helpers/server.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';

// A forward step of the database host's clock larger than the lease (NTP correcting a clock
// that had fallen behind, a VM resumed): every lease is computed with the database's now(), so
// every live node's lease looks lapsed at once. Before, the sweep (src/store/pg/recovery.ts)
// refunded the reservations of every lapsed lease at once, the live nodes' calls in inference
// among them (a node's own process swept its own API worker's node), their settlements were
// refused, and their clients heard 500 inference_failed though inference had worked (found
// with libfaketime stepping a PostgreSQL host by 60 s). Now a sweep takes a lease only once it
// has watched it lapsed and unrenewed for a whole lease of its own monotonic time, a live node
// renews a lease that lapsed only by the database's clock, and its settlement, refused on such
// a lease, renews and is made. A node that really stopped is still swept, a lease later.
//
// The step is made by SQL: every lease moved 60 s back, which is what a forward step of 60 s
// looks like to the sweep and the settlement (now() - lease_until grows by 60 s at once).

const pg = await startPostgres();
t.teardown(() => pg.stop());

const STEP = `UPDATE nodes SET lease_until = lease_until - interval '60 s'`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Leases long enough that a loaded machine's event-loop stalls cannot make a live node miss a
// renewal for a whole lease (it renews every third of one).
const LEASE_MS = 1500;

/** Two nodes on the database, closed after the test, and a call in flight on the first: its
 * reservation, under key `key`, of a token with 10 units. */
async function holderAndSweeper(t: Test, key: string, holderLeaseMs = LEASE_MS, sweeperLeaseMs = LEASE_MS) {
  const [holder, sweeper] = await Promise.all([PgBackend.open(pg.url, { leaseMs: holderLeaseMs }), PgBackend.open(pg.url, { leaseMs: sweeperLeaseMs })]);
  t.teardown(() => Promise.all([holder.close(), sweeper.close()]));
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await holder.insertToken(tok);
  const out = await holder.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'fp', at: Date.now() }));
  if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
  return { holder, sweeper, tok, rsv: out.reservation };
}

t.test('a forward step of the database clock: the live node\'s call in flight settles, charged once; the sweeps leave it', async (t) => {
  const { holder: a, sweeper: b, tok, rsv } = await holderAndSweeper(t, 'k-step');
  const leaseMs = LEASE_MS;
  await a.pool.query(STEP);
  t.equal((await a.pool.query('SELECT count(*)::int AS n FROM nodes WHERE lease_until > now()')).rows[0].n, 0, 'every lease looks lapsed');
  // both nodes sweep, often, for three leases of their time, while a renews (every third of it)
  const swept: string[] = [];
  const until = performance.now() + 3 * leaseMs;
  while (performance.now() < until) {
    for (const n of [b, a]) swept.push(...(await n.recoverPending(Date.now())).map((r) => r.id));
    await sleep(50);
  }
  t.same(swept, [], 'no sweep took the live node\'s reservation (each took it at the first sweep after the step)');
  t.equal((await a.getReservation(rsv.id))!.state, 'pending', 'still in flight');
  // the step again, just before the settlement: refused on the lapsed lease, it renews and is made
  await a.pool.query(STEP);
  const settled = await a.settle(rsv, Date.now(), (usage) => JSON.stringify({ usage }), [{ ok: 1 }]);
  t.equal(settled.kind, 'settled', 'the settlement on a lease lapsed by the step is made (it was refused: 500 inference_failed)');
  t.equal((await a.getReservation(rsv.id))!.state, 'charged');
  t.equal(rsv.node, a.node, 'under the same node id: the lease was renewed, not registered anew');
  t.same((await a.listLedger({ token_id: tok.id })).items.map((e) => e.kind), ['charge'], 'charged once, never refunded');
  t.same((await a.usageSnapshot(tok, T0)).map((u) => u.used), [1]);
  t.ok((await a.verifyLedger()).ok);
});

// review3b: a sweeper whose lease is shorter than the holder's waited only its own, while the
// holder renews every third of its own: with NODE_LEASE_SECONDS 2 and 30 a step took the 30 s
// node's call in flight. The holder records its lease length (nodes.info lease_ms), and a
// sweeper waits the longer of the two.
t.test('a sweeper with a shorter lease waits the holder\'s: a step right after the holder renewed takes nothing', async (t) => {
  const { holder, sweeper: quick, rsv } = await holderAndSweeper(t, 'k-quick', 3000, 300);
  // the step just after a renewal: the holder's next one is a third of its lease (1 s) away,
  // more than three of the quick sweeper's leases
  t.ok(await holder.renew(), 'renewed');
  await holder.pool.query(STEP);
  const swept: string[] = [];
  const until = performance.now() + 4_000;
  while (performance.now() < until) {
    swept.push(...(await quick.recoverPending(Date.now())).map((r) => r.id));
    await sleep(50);
  }
  t.same(swept, [], 'the quick sweeper left the live holder\'s reservation');
  t.equal((await holder.getReservation(rsv.id))!.state, 'pending');
  const settled = await holder.settle(rsv, Date.now(), (usage) => JSON.stringify({ usage }), [{ ok: 1 }]);
  t.equal(settled.kind, 'settled');
});

t.test('a node that really stopped is still swept after a step: a lease of the sweeper\'s time after it first saw it lapsed', async (t) => {
  const { holder: dead, sweeper: b, tok, rsv } = await holderAndSweeper(t, 'k-dead');
  const leaseMs = LEASE_MS;
  // the holder stops renewing (as a killed process would) but keeps its connections
  (dead as unknown as { renewTimer: NodeJS.Timeout }).renewTimer.close();
  await b.pool.query(STEP);
  const firstSeen = performance.now();
  t.same(await b.recoverPending(Date.now()), [], 'the first sweep after the step only watches the lapsed lease');
  let swept: Reservation[] = [];
  for (let i = 0; i < 300 && swept.length === 0; i++) {
    await sleep(50); // polling for the sweep, bounded (15 s)
    swept = await b.recoverPending(Date.now());
  }
  t.same(swept.map((r) => r.id), [rsv.id], 'the dead node\'s reservation is refunded');
  t.ok(performance.now() - firstSeen >= leaseMs, 'once watched unrenewed for a whole lease');
  t.equal((await b.getReservation(rsv.id))!.state, 'refunded');
  const retry = await b.reserve(reserveInput(tok, { idempotencyKey: 'k-dead', fingerprint: 'fp', at: Date.now() }));
  t.equal(retry.kind, 'reserved', 'its key is released');
  if (retry.kind === 'reserved') await b.refund(retry.reservation.id, Date.now());
  t.ok((await b.verifyLedger()).ok);
});

t.test('through the service: a verify call in inference while the database clock steps 60 s forward is answered 200, charged once', async (t) => {
  const LEASE_S = 2;
  const api = await startApi({
    env: { DATABASE_URL: pg.url, NODE_LEASE_SECONDS: String(LEASE_S), TEST_INFERENCE_DELAY_MS: String(3 * LEASE_S * 1000), TEST_INFERENCE_DELAY_PREFIX: 'slow-' },
    engine: 'real',
    ready: true,
  });
  t.teardown(() => api.stop());
  // another node sweeping, often, beside the service's own sweep (its main thread's node, every
  // half lease, which took its API worker's reservation in the reviewer's run)
  const peer = await PgBackend.open(pg.url, { leaseMs: LEASE_S * 1000 });
  t.teardown(() => peer.close());
  const { id, token } = await makeToken(api, ['rgb_liveness:10:never']);
  const used = async () => (await (await fetch(`${api.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used as number;
  const call = postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id: 'slow-step' })]), { 'idempotency-key': 'k-step-api' });
  for (let i = 0; i < 200 && (await used()) === 0; i++) await sleep(50); // bounded poll until the reservation is held
  t.equal(await used(), 1, 'held while the call is in inference');
  await peer.pool.query(STEP);
  const swept: string[] = [];
  let done = false;
  void call.finally(() => (done = true));
  while (!done) {
    swept.push(...(await peer.recoverPending(Date.now())).filter((r) => r.token_id === id).map((r) => r.id));
    await sleep(100);
  }
  const res = await call;
  t.equal(res.status, 200, `answered 200 (it was 500 inference_failed): ${res.text}`);
  t.same(swept, [], 'the other node\'s sweeps left it');
  const refunded = api.logLines().filter((l) => /crash recovery: pending reservation refunded/.test(l.msg) && l.token_id === id);
  t.same(refunded, [], 'the service\'s own sweep left it');
  t.equal(await used(), 1, 'charged once');
  const ledger = await api.store.listLedger({ token_id: id });
  t.same(ledger.items.filter((e) => e.kind === 'refund'), [], 'no refund in the ledger');
  t.ok((await api.store.verifyLedger()).ok);
});

// A step of this node's own wall clock (its host's NTP, an operator's `date -s`). The node kept
// its view of its own lease (lease.ts: renewed when, held until when) on Date.now(): stepped
// forward, a node renewing in time thought its lease lapsed, answered not ready, and refused
// the settlement of a call it held (a database whose clock stepped with it refused it, and the
// node did not renew a lease it thought lapsed); stepped back, a node whose renewals had failed
// for longer than a lease thought its lease held, revived it in the database and settled, while
// another node may be sweeping it. Now that view is kept on performance.now(). The step is made
// by faking Date.now() in this process, the one clock the node read for it.

/** This process's wall clock (Date.now()) stepped by `ms` until the end of the test. */
function stepWallClock(t: Test, ms: number): void {
  const wall = Date.now;
  Date.now = () => wall.call(Date) + ms;
  t.teardown(() => {
    Date.now = wall;
  });
}

t.test('this node\'s wall clock steps 60 s forward (the database\'s with it): its lease still counts as held, its call in flight settles under the same node id', async (t) => {
  const { holder, tok, rsv } = await holderAndSweeper(t, 'k-wall-forward');
  t.ok(await holder.renew(), 'renewed');
  stepWallClock(t, 60_000);
  t.equal(await holder.healthy(), true, 'still ready (it answered not ready: "this node\'s lease was not renewed since ...")');
  t.equal(holder.unavailableReason(), null);
  // the same NTP step on the database host: the lease looks lapsed there too
  await holder.pool.query(STEP);
  const settled = await holder.settle(rsv, Date.now(), (usage) => JSON.stringify({ usage }), [{ ok: 1 }]);
  t.equal(settled.kind, 'settled', 'the settlement is made (it was refused and refunded: 500 inference_failed for inference that worked)');
  t.equal((await holder.getReservation(rsv.id))!.state, 'charged');
  const next = await holder.reserve(reserveInput(tok, { idempotencyKey: 'k-wall-forward-2', fingerprint: 'fp', at: Date.now() }));
  t.equal(next.kind === 'reserved' ? next.reservation.node : next.kind, rsv.node, 'the next call reserves under the same node id: the lease was renewed, not registered anew');
  if (next.kind === 'reserved') await holder.refund(next.reservation.id, Date.now());
  t.same((await holder.listLedger({ token_id: tok.id })).items.filter((e) => e.request_id === rsv.request_id).map((e) => e.kind), ['charge'], 'charged once, never refunded');
  t.ok((await holder.verifyLedger()).ok);
});

t.test('this node\'s wall clock steps 60 s back after its renewals failed for longer than a lease: the lapsed lease stays lapsed, its late settlement is refused and refunded', async (t) => {
  const { holder, sweeper, tok, rsv } = await holderAndSweeper(t, 'k-wall-back');
  // the database refuses this node's renewals (an outage, as far as the lease goes); the
  // timer keeps trying, every third of a lease
  let failed = 0;
  const query = holder.pool.query.bind(holder.pool);
  (holder.pool as { query: unknown }).query = (text: unknown, ...rest: unknown[]) => {
    if (typeof text === 'string' && text.includes('WITH renewed AS')) {
      failed++;
      return Promise.reject(new Error('connection refused'));
    }
    return (query as (...a: unknown[]) => unknown)(text, ...rest);
  };
  const lapsed = async () => (await sweeper.pool.query('SELECT lease_until <= now() AS lapsed FROM nodes WHERE id = $1', [rsv.node])).rows[0].lapsed as boolean;
  // bounded poll (15 s) until the lease has lapsed in the database: the node renewed it last
  // before the database's now() of that renewal, so by its own clock it lapsed too
  for (let i = 0; i < 300 && !(failed > 0 && (await lapsed())); i++) await sleep(50);
  t.ok(failed > 0 && (await lapsed()), `renewals failed (${failed}) for longer than a lease`);
  stepWallClock(t, -60_000);
  t.equal(await holder.healthy(), false, 'not ready (it answered ready: its wall clock said the lease was renewed 60 s in the future)');
  const since = Date.parse(/not renewed since (\S+)$/.exec(holder.unavailableReason()?.reason ?? '')?.[1] ?? '');
  t.ok(since <= Date.now() - LEASE_MS, 'the reason dates the last renewal a lease or more before the wall clock\'s now, as stepped (never after it)');
  // the database answers again
  (holder.pool as { query: unknown }).query = query;
  const settled = await holder.settle(rsv, Date.now(), (usage) => JSON.stringify({ usage }), [{ ok: 1 }]);
  t.equal(settled.kind, 'refused', 'the late settlement is refused (the node revived its lapsed lease under the same id and settled)');
  t.equal((await holder.getReservation(rsv.id))!.state, 'refunded', 'its units are back');
  t.equal(await lapsed(), true, 'the lapsed lease was not revived');
  const next = await holder.reserve(reserveInput(tok, { idempotencyKey: 'k-wall-back-2', fingerprint: 'fp', at: Date.now() }));
  t.ok(next.kind === 'reserved' && next.reservation.node !== rsv.node, 'the next call reserves under a node registered anew');
  if (next.kind === 'reserved') await holder.refund(next.reservation.id, Date.now());
  t.same((await holder.usageSnapshot(tok, T0)).map((u) => u.used), [0]);
  t.ok((await holder.verifyLedger()).ok);
});
