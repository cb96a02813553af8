import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Retention on the shared PostgreSQL store, through two real nodes and the CLI, moved by the
// test clock: rows past their period go (audit, results, ledger), the ledger still verifies
// from any node, usage is unchanged, and both nodes' pruners ran without removing twice.

const DAY = 86_400_000;
const T0 = Date.parse('2026-01-10T12:00:00.000Z');
const pg = await startPostgres();
t.teardown(() => pg.stop());
const dir = tempDir();
const clock = path.join(dir, 'clock');
const setClock = (ms: number) => fs.writeFileSync(clock, new Date(ms).toISOString());
const env = { CLOCK_FILE: clock, DATABASE_URL: await pg.database('retention'), WORKERS: '1' };

t.test('PostgreSQL: each kind pruned after its period by the CLI and by every node; the ledger verifies', async (t) => {
  setClock(T0);
  const a = await startServer({ env, ready: true, timeoutMs: 240_000 });
  t.teardown(() => a.stop());
  const { token } = await makeToken(a, ['rgb_liveness:100:never']);
  for (const id of ['p-1', 'p-2']) t.equal((await postVerify(a.baseUrl, token, 'rgb_liveness', request([single({ id })]))).status, 200);
  const used = async (base: string) => (await (await fetch(`${base}/v1/me`, { headers: bearer(token) })).json()).usage[0].used;
  t.equal(await used(a.baseUrl), 2);
  // the audit line is written after the answer
  await waitFor(async () => (await a.cli(['audit', 'list'])).json?.items?.length >= 2, { what: 'two audit rows' });

  setClock(T0 + 91 * DAY);
  const r = await a.cli(['retention', 'prune']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { audit: 0, results: 2, ledger: 0 }, 'results go after 90 days, on PostgreSQL too');

  // two nodes start past 400 days: both prune at start; each row goes once
  setClock(T0 + 401 * DAY);
  await a.stop();
  const [b, c] = await Promise.all([startServer({ env, ready: true, timeoutMs: 240_000 }), startServer({ env, ready: true, timeoutMs: 240_000 })]);
  t.teardown(() => Promise.all([b.stop(), c.stop()]));
  // each node logs its pass once it ends (a pass that found nothing logs nothing): wait until
  // the logged ledger removals add up to the two entries there were
  const lines = () => [b, c].flatMap((s) => s.logLines().filter((l) => l.msg === 'retention: pruned').map((l) => l.pruned));
  const ledgerRemoved = () => lines().reduce((n, p) => n + (p.ledger ?? 0), 0);
  await waitFor(() => ledgerRemoved() >= 2, { what: 'the nodes\' pruning passes', timeoutMs: 60_000 });
  t.equal(ledgerRemoved(), 2, 'the two ledger entries were removed once between the nodes');
  t.equal(lines().reduce((n, p) => n + (p.audit ?? 0), 0) >= 2, true, 'the audit rows went');
  const verify = await c.cli(['ledger', 'verify']);
  t.equal(verify.code, 0, 'ledger verify holds with every entry pruned');
  t.match(verify.json, { ok: true, entries: 0 });
  t.equal(await used(b.baseUrl), 2, 'usage unchanged: the pruned entries live on as per-window totals');
  t.equal((await postVerify(c.baseUrl, token, 'rgb_liveness', request([single({ id: 'p-3' })]))).status, 200);
  t.equal(await used(b.baseUrl), 3);
  t.match((await b.cli(['ledger', 'verify'])).json, { ok: true, entries: 1 }, 'totals and new entries verify together');
});
