import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, runCli, startServer, tempDir, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { ledgerVerify } from '../helpers/store.ts';

// Retention driven by the test clock (CLOCK_FILE moves the service and the CLI together):
// each kind goes after its own period, by the CLI and by the service's own pruner, and the
// ledger still verifies, with usage unchanged, once its entries are gone.

const DAY = 86_400_000;
const T0 = Date.parse('2026-01-10T12:00:00.000Z');
const dir = tempDir();
const dataDir = path.join(dir, 'data');
const clock = path.join(dir, 'clock');
const setClock = (ms: number) => fs.writeFileSync(clock, new Date(ms).toISOString());
const env = { CLOCK_FILE: clock, TEST_INFERENCE_FAIL_PREFIX: 'fail-' };

function counts() {
  const db = lmdbOpen(dataDir);
  try {
    return {
      audit: db.audit.getKeysCount(),
      results: db.results.getKeysCount(),
      ledger: db.ledger.getKeysCount(),
      archiveDays: fs.existsSync(path.join(dataDir, 'archive')) ? fs.readdirSync(path.join(dataDir, 'archive')).length : 0,
    };
  } finally {
    void db.close();
  }
}

async function neverUsed(s: ServerHandle, token: string): Promise<number> {
  const me = await (await fetch(`${s.baseUrl}/v1/me`, { headers: bearer(token) })).json();
  return me.usage.find((u: any) => u.module_id === 'rgb_liveness').used;
}

async function waitLog(s: ServerHandle, pred: (l: any) => boolean, ms = 30_000): Promise<any> {
  return waitFor(() => s.logLines().find(pred), { timeoutMs: ms, intervalMs: 100, what: 'a log line' }).catch(() => undefined);
}

t.test('each kind is pruned after its own period; the ledger verifies and usage stays', async (t) => {
  setClock(T0);
  let s = await startServer({ dataDir, env, ready: true });
  t.teardown(() => s.stop());
  const { token } = await makeToken(s, ['rgb_liveness:100:never'], ['--demo']);
  for (const id of ['r-1', 'r-2', 'fail-1']) await postVerify(s.baseUrl, token, 'rgb_liveness', request([single({ id })]));
  t.equal(await neverUsed(s, token), 2, 'two charged, the failed one refunded');
  // the audit line is written after the answer: wait for all three, bounded
  await waitFor(() => counts().audit >= 3, { timeoutMs: 10_000, what: 'three audit rows' }).catch(() => undefined);
  t.same(counts(), { audit: 3, results: 2, ledger: 4, archiveDays: 1 }, 'three audit rows, two results, charge+charge+charge+refund, one archive day');

  // defaults: archive 30 days, results 90, audit and ledger 400
  setClock(T0 + 30 * DAY);
  let r = await s.cli(['retention', 'prune']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { audit: 0, results: 0, ledger: 0, archive: 0 }, 'the archive day is not 30 whole days old yet');
  setClock(T0 + 31 * DAY);
  r = await s.cli(['retention', 'prune']);
  t.match(r.json, { audit: 0, results: 0, ledger: 0, archive: 3 }, 'the face images go after 30 days');
  t.equal(counts().archiveDays, 0);

  setClock(T0 + 91 * DAY);
  r = await s.cli(['retention', 'prune']);
  t.match(r.json, { audit: 0, results: 2, ledger: 0, archive: 0 });

  // a kind set to 0 is kept for ever
  setClock(T0 + 401 * DAY);
  const keepAll = await runCli(dataDir, ['retention', 'prune'], '', { ...env, RETENTION_AUDIT_DAYS: '0', RETENTION_LEDGER_DAYS: '0' });
  t.same(keepAll.json.audit, null);
  t.same(keepAll.json.ledger, null);
  t.equal(counts().audit, 3);
  await s.stop();

  // the service's own pruner: at start (then hourly), with the default periods
  s = await startServer({ dataDir, env, ready: true });
  const line = await waitLog(s, (l) => l.msg === 'retention: pruned');
  t.match(line?.pruned, { audit: 3, ledger: 4 }, 'the service pruned audit and ledger past 400 days');
  t.same(counts(), { audit: 0, results: 0, ledger: 0, archiveDays: 0 });

  const verify = await ledgerVerify(s);
  t.equal(verify.code, 0, 'ledger verify holds with every entry pruned');
  t.match(verify.json, { ok: true, entries: 0 });
  t.equal(await neverUsed(s, token), 2, 'usage unchanged: the pruned entries live on as per-window totals');

  const after = await postVerify(s.baseUrl, token, 'rgb_liveness', request([single({ id: 'r-3' })]));
  t.equal(after.status, 200);
  t.equal(await neverUsed(s, token), 3);
  const again = await ledgerVerify(s);
  t.match(again.json, { ok: true, entries: 1 }, 'totals and new entries verify together');
});

t.test('a counter that disagrees with totals plus entries is still caught', async (t) => {
  const db = lmdbOpen(dataDir);
  const key = [...db.ledgerPruned.getKeys({})][0];
  t.ok(key, 'there are pruned totals');
  await db.ledgerPruned.put(key, (db.ledgerPruned.get(key) as number) + 1);
  await db.close();
  const r = await runCli(dataDir, ['ledger', 'verify'], '', env);
  t.equal(r.code, 1);
  t.equal(r.json.ok, false);
});
