import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';

// With PostgreSQL, quota windows and record times follow the database's clock: a node whose
// own clock is two days ahead (TEST_CLOCK_SKEW_MS) still charges today's window, the one
// another node reads, and stamps its ledger entry with the database's time.

const DAY = 86_400_000;
const pg = await startPostgres();
t.teardown(() => pg.stop());
const base = { DATABASE_URL: pg.url, WORKERS: '1' };
const [skewed, plain] = await Promise.all([
  startServer({ env: { ...base, TEST_CLOCK_SKEW_MS: String(2 * DAY) }, ready: true, timeoutMs: 240_000 }),
  startServer({ env: base, ready: true, timeoutMs: 240_000 }),
]);
t.teardown(() => Promise.all([skewed.stop(), plain.stop()]));

t.test('a node whose clock is two days ahead charges the window every node shares', async (t) => {
  const { id, token } = await makeToken(plain, ['rgb_liveness:10:day']);
  const before = Date.now();
  const r = await postVerify(skewed.baseUrl, token, 'rgb_liveness', request([single({ id: 'clock-1' })]));
  t.equal(r.status, 200, r.text);
  const after = Date.now();
  const usage = (await (await fetch(`${plain.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0];
  t.equal(usage.used, 1, "the other node sees the unit in today's window");
  t.equal(r.json.usage[0].reset_at, usage.reset_at, 'both nodes name the same window end');
  const entry = (await plain.cli(['ledger', 'list', '--token', id])).json.items[0];
  const at = Date.parse(entry.at);
  // this test runs on the database's host: its clock is the database's, give or take
  t.ok(at >= before - 5_000 && at <= after + 5_000, `the ledger entry carries the database's time (${entry.at})`);
});
