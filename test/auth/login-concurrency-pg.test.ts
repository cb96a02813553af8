import t from 'tap';
import { PAIR_LIMIT } from '../../src/store/throttle-rules.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startServer, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { loginRequest } from './session-client.ts';

// Security issue 29, item 1, on the shared PostgreSQL store: two node processes of the real
// service on one database, a burst of guesses for one name from one address split between
// them. The counts are reserved in the database before any password is checked, so the two
// nodes together check no more than the pair limit.
const pg = await startPostgres();
t.teardown(() => pg.stop());
const ADMIN = { username: 'root', password: 'correct horse battery' };
const env = { DATABASE_URL: pg.url, WORKERS: '1', ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password };
const nodes: ServerHandle[] = await Promise.all([
  startServer({ env, ready: true, timeoutMs: 240_000 }),
  startServer({ env, ready: true, timeoutMs: 240_000 }),
]);
t.teardown(() => Promise.all(nodes.map((n) => n.stop())));

t.test('40 guesses at once over two nodes: at most the pair limit are checked, the rest 429', async (t) => {
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
