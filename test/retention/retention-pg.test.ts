import t from 'tap';
import { setClockFile } from '../../src/clock.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Logger } from '../../src/observability/index.ts';
import { pruneOnce, startRetention } from '../../src/retention/index.ts';
import { storeKeys } from '../../src/signing/index.ts';
import { PgBackend } from '../../src/store/pg/index.ts';
import { request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { tempDir } from '../helpers/server.ts';
import fs from 'node:fs';
import path from 'node:path';
import { addToken, audits, call, usedBy, world } from '../verify/world.ts';

// Retention on the shared PostgreSQL store, in process: two nodes' stores opened on one real
// database (as two node processes open it), calls charged through the verify use case
// (test/verify/world.ts), the pruning pass the CLI's `retention prune` runs (pruneOnce) and the
// pruner every node starts (startRetention, what src/main.ts starts before serving), moved by
// the service's clock: rows past their period go (audit, results, ledger), the ledger still
// verifies from either node, usage is unchanged, and both nodes' pruners ran at once without
// removing a row twice.
// Replaces the spawned test/retention/retention-pg.test.ts (three node processes and four CLI
// runs; issue 43): each of its checks is here. That a node starts its pruner at start is the
// process's composition, shown through a real server in test/retention/retention.test.ts; the
// periods per kind there too (the same pruneOnce on either store), and the store's prune
// rules on both stores in test/store/contract.ts.

const DAY = 86_400_000;
const T0 = Date.parse('2026-01-10T12:00:00.000Z');
const pg = await startPostgres();
t.teardown(() => pg.stop());
const url = await pg.database('retention');
const [nodeA, nodeB] = await Promise.all([PgBackend.open(url), PgBackend.open(url)]);
t.teardown(() => Promise.all([nodeA.close(), nodeB.close()]));
const config = loadConfig({ DATA_DIR: tempDir(), DATABASE_URL: url });

// the service's clock (src/clock.ts), which startRetention reads, as CLOCK_FILE sets a node's
const clockFile = path.join(tempDir(), 'clock');
const setClock = (ms: number) => fs.writeFileSync(clockFile, new Date(ms).toISOString());
setClockFile(clockFile);
t.teardown(() => setClockFile(process.env.CLOCK_FILE || undefined));

/** a node's logger, as far as the pruner logs: its info lines */
function logger() {
  const lines: { msg: string; obj: Record<string, any> }[] = [];
  const log = {
    info: (obj: Record<string, any>, msg: string) => void lines.push({ msg, obj }),
    error: (obj: Record<string, any>, msg: string) => void lines.push({ msg, obj }),
  } as unknown as Logger;
  return { log, lines };
}

t.test('PostgreSQL: each kind pruned after its period by the CLI\'s pass and by every node; the ledger verifies', async (t) => {
  setClock(T0);
  const w = world(nodeA);
  w.clock.at = T0;
  const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 100, period: 'never' }]);
  for (const id of ['p-1', 'p-2']) t.equal((await call(w, plaintext, request([single({ id })]))).status, 200);
  t.equal(await usedBy(w, token), 2);
  // the audit line is written after the answer
  await audits(w, token, 2);

  const r = await pruneOnce(nodeA, config, T0 + 91 * DAY);
  t.match(r, { audit: 0, results: 2, ledger: 0 }, 'results go after 90 days, on PostgreSQL too');

  // two nodes start past 400 days: both prune at start, at once; each row goes once
  setClock(T0 + 401 * DAY);
  const [a, b] = [logger(), logger()];
  const stops = [startRetention(nodeA, config, a.log), startRetention(nodeB, config, b.log)];
  // stopping a pruner waits for the pass under way: both first passes have ended after this
  await Promise.all(stops.map((stop) => stop()));
  // each node logs its pass (a pass that found nothing logs nothing)
  const lines = [a, b].flatMap((n) => n.lines.filter((l) => l.msg === 'retention: pruned').map((l) => l.obj.pruned));
  t.equal(lines.reduce((n, p) => n + (p.ledger ?? 0), 0), 2, 'the two ledger entries were removed once between the nodes');
  t.equal(lines.reduce((n, p) => n + (p.audit ?? 0), 0) >= 2, true, 'the audit rows went');
  t.same([...a.lines, ...b.lines].filter((l) => l.msg !== 'retention: pruned'), [], 'no pass failed');
  const verify = await nodeB.verifyLedger();
  t.equal(verify.ok, true, 'ledger verify holds with every entry pruned');
  t.match(verify, { ok: true, entries: 0 });
  const wb = world(nodeB);
  wb.clock.at = T0 + 401 * DAY;
  t.equal(await usedBy(wb, token), 2, 'usage unchanged: the pruned entries live on as per-window totals');
  t.equal((await call(wb, plaintext, request([single({ id: 'p-3' })]))).status, 200);
  w.clock.at = wb.clock.at;
  t.equal(await usedBy(w, token), 3);
  t.match(await nodeA.verifyLedger(), { ok: true, entries: 1 }, 'totals and new entries verify together');
});

t.test('PostgreSQL: a retired signing key\'s row goes 30 days after its rotation with no rotation after it; a revoked one stays', async (t) => {
  const keys = storeKeys(nodeA);
  const T1 = T0 + 500 * DAY;
  const first = (await keys.current(T1)).kid;
  await keys.rotate(T1);
  const second = (await keys.current(T1)).kid;
  await keys.rotate(T1);
  await keys.revoke(second, 'incident 44', T1);
  const kids = async () => (await nodeB.listSigningKeys()).map((k) => k.kid);
  t.match(await pruneOnce(nodeB, config, T1 + 30 * DAY - 60_000), { signing_keys: 0 }, 'kept while less than 30 days retired');
  t.ok((await kids()).includes(first));
  t.match(await pruneOnce(nodeB, config, T1 + 30 * DAY), { signing_keys: 1 }, 'gone once 30 days retired');
  t.notOk((await kids()).includes(first), 'the row, and its private key, are gone');
  t.ok((await kids()).includes(second), 'the revoked key\'s record stays');
  // the pass every node runs hourly (at start here)
  await keys.rotate(T1 + 40 * DAY);
  const retired = (await nodeA.listSigningKeys()).filter((k) => k.retired_at !== null && !k.revoked_at).map((k) => k.kid);
  setClock(T1 + 71 * DAY);
  const a = logger();
  await startRetention(nodeA, config, a.log)();
  t.match(a.lines.find((l) => l.msg === 'retention: pruned')?.obj.pruned, { signing_keys: retired.length }, 'the node\'s own pass deleted the key retired 31 days before');
  t.notOk((await kids()).some((k) => retired.includes(k)));
});
