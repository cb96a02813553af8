import pg from 'pg';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';
import { poolSizePerThread } from '../../src/store/select.ts';

// Issue 25: a node's PostgreSQL connections are sized per node (DATABASE_POOL_SIZE shared out
// over its threads), so a few nodes fit a default max_connections of 100.
t.test('the share per thread', async (t) => {
  t.equal(poolSizePerThread({ WORKERS: 32, DATABASE_POOL_SIZE: 24 }), 1, 'a 4-core node: one each, 33 in all');
  t.equal(poolSizePerThread({ WORKERS: 8, DATABASE_POOL_SIZE: 24 }), 2, 'a 1-core node: 18 in all');
  t.equal(poolSizePerThread({ WORKERS: 2, DATABASE_POOL_SIZE: 24 }), 4, 'never more than 4 a thread');
  t.equal(poolSizePerThread({ WORKERS: 2, DATABASE_POOL_SIZE: 1 }), 1, 'never less than one');
});

t.test('a node under concurrent calls stays within DATABASE_POOL_SIZE', async (t) => {
  const db = await startPostgres();
  t.teardown(() => db.stop());
  const server = await startServer({ env: { DATABASE_URL: db.url, WORKERS: '2', DATABASE_POOL_SIZE: '3' }, ready: true, timeoutMs: 240_000 });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:1000:day']);
  // more calls at once than connections: each thread's pool queues rather than opening more
  const calls = await Promise.all([
    ...Array.from({ length: 6 }, (_, i) => postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: `p-${i}` })]))),
    ...Array.from({ length: 12 }, () => fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })),
  ]);
  t.ok(calls.every((c) => c.status === 200 || c.status === 503), 'answered (503 only when the host\'s slots are full)');
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'liveness-service' AND pid <> pg_backend_pid()");
  const open = Number(rows[0]!.n);
  t.ok(open >= 1 && open <= 3, `the node holds ${open} connection(s), at most 3 (one per thread)`);
});
