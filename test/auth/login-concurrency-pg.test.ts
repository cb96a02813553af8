import t from 'tap';
import { startApi, type ApiHandle } from '../helpers/api.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startServer, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { loginRequest } from './session-client.ts';

// Security issue 29, item 1, on the shared PostgreSQL store: two nodes of the real service on
// one database, a burst of guesses for one name from one address split between them. The
// counts are reserved in the database before any password is checked, so the two nodes
// together check no more than the pair limit: the documented 5 (docs/administration.md), not
// the code's constant, which a mistaken change would carry the expectation along with.
// Node A is the service's API in this process (test/helpers/api.ts: the real app and store, its
// start-up steps, its own connection pool; no models, which a login does not use), node B a
// started server: two nodes, each with its own pool and hash gate, and a server start fewer.
const PAIR_LIMIT = 5;
const pg = await startPostgres();
t.teardown(() => pg.stop());
const ADMIN = { username: 'root', password: 'correct horse battery' };
// scrypt at the test-only N=2^14: the throttle counts attempts before any hash, whatever it
// costs (N=2^17 itself: login-concurrency.test.ts)
const env = { DATABASE_URL: pg.url, WORKERS: '1', ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TEST_PASSWORD_SCRYPT_N: String(2 ** 14) };
const nodes: (ServerHandle | ApiHandle)[] = await Promise.all([
  startApi({ env }),
  startServer({ env, ready: true, timeoutMs: 240_000 }),
]);
t.teardown(() => Promise.all(nodes.map((n) => n.stop())));

t.test('40 guesses at once over two nodes: at most the pair limit are checked, the rest 429', async (t) => {
  // a success from this address first, so that the pair limit alone stops the burst (from an
  // address the name never logged in from, the name's delay stops it at the same count)
  t.equal((await loginRequest(nodes[1]!.baseUrl, ADMIN.username, ADMIN.password)).status, 200, 'a login from this address: a known one for the name now');
  const rs = await Promise.all(
    Array.from({ length: 40 }, (_, i) => loginRequest(nodes[i % 2]!.baseUrl, ADMIN.username, i === 34 ? ADMIN.password : `guess ${i}`)),
  );
  const by: Record<number, number> = {};
  for (const r of rs) by[r.status] = (by[r.status] ?? 0) + 1;
  t.ok((by[401] ?? 0) + (by[200] ?? 0) <= PAIR_LIMIT, `passwords checked: ${JSON.stringify(by)}`);
  t.equal(by[429], 40 - PAIR_LIMIT);
  // a log line may reach the test a moment after its answer
  const lines = await waitFor(() => {
    const failed = nodes.flatMap((n) => n.logLines()).filter((l) => l.msg === 'login failed');
    return failed.length >= 40 - (by[200] ?? 0) ? failed : undefined;
  }, { what: 'a log line per failed login' });
  t.equal(lines.filter((l) => l.code === 'invalid_credentials').length, by[401] ?? 0, 'the nodes logged one checked failure per 401');
  if (by[200] === undefined) {
    const after = await loginRequest(nodes[0]!.baseUrl, ADMIN.username, ADMIN.password);
    t.equal(after.status, 429, 'the right password is refused once the burst spent the limit');
  }
});
