import pg from 'pg';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken } from '../helpers/server.ts';
import { poolSizePerThread } from '../../src/store/select.ts';

// Issue 25: a node's PostgreSQL connections are sized per node (DATABASE_POOL_SIZE shared out
// over its threads), so a few nodes fit a default max_connections of 100.
t.test('the share per thread', async (t) => {
  t.equal(poolSizePerThread({ WORKERS: 32, DATABASE_POOL_SIZE: 24 }), 1, 'a 4-core node: one each, 33 in all');
  t.equal(poolSizePerThread({ WORKERS: 8, DATABASE_POOL_SIZE: 24 }), 2, 'a 1-core node: 18 in all');
  t.equal(poolSizePerThread({ WORKERS: 2, DATABASE_POOL_SIZE: 24 }), 4, 'never more than 4 a thread');
  t.equal(poolSizePerThread({ WORKERS: 2, DATABASE_POOL_SIZE: 1 }), 1, 'never less than one');
});

// The node's API in this process (test/helpers/api.ts startApi: the real app over the store
// opened as the service opens it, openConfiguredStore, with WORKERS=2's per-thread share), not a
// started server (issue 43: a server start fewer). What the test holds to is the thread's pool:
// concurrent calls queue on its share rather than opening more connections. The node's total is
// that share times its threads (the main thread and each API worker open the store the same
// way: src/store/select.ts), which the arithmetic above holds.
t.test('an API thread under concurrent calls stays within its share of DATABASE_POOL_SIZE', async (t) => {
  const db = await startPostgres();
  t.teardown(() => db.stop());
  // the real engine: verify calls reserve and settle on the one connection, as they did in the
  // started server this replaced (with no models they stop at module_unavailable, before any
  // transaction, and a transaction that took a second connection would go unseen)
  const server = await startApi({ env: { DATABASE_URL: db.url, WORKERS: '2', DATABASE_POOL_SIZE: '3' }, engine: 'real', ready: true });
  t.teardown(() => server.stop());
  // 3 connections over the main thread and 2 API workers: one each
  const share = 1;
  const { token } = await makeToken(server, ['rgb_liveness:1000:day']);
  // more calls at once than connections: the thread's pool queues rather than opening more
  const calls = await Promise.all([
    ...Array.from({ length: 6 }, (_, i) => postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: `p-${i}` })]))),
    ...Array.from({ length: 12 }, () => fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })),
  ]);
  t.ok(calls.every((c) => c.status === 200 || c.status === 503), 'answered (503 only when the slots are full)');
  t.ok(calls.slice(0, 6).some((c) => c.status === 200), `verify calls reserved and settled on the one connection: ${calls.slice(0, 6).map((c) => c.status).join(', ')}`);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'liveness-service' AND pid <> pg_backend_pid()");
  const open = Number(rows[0]!.n);
  t.ok(open >= 1 && open <= share, `the thread holds ${open} connection(s), at most its share, ${share}`);
});
