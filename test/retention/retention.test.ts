import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { startApi } from '../helpers/api.ts';
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

type Databases = ReturnType<typeof lmdbOpen>;

/** the store's records by kind, read from `db` (the in-process service's own handle), or from
 * the store opened here for the read when no service in this process holds it */
function counts(db?: Databases) {
  const own = db ?? lmdbOpen(dataDir);
  try {
    for (const d of [own.audit, own.results, own.ledger, own.byToken]) (d as any).resetReadTxn?.();
    return {
      audit: own.audit.getKeysCount(),
      results: own.results.getKeysCount(),
      ledger: own.ledger.getKeysCount(),
      // the per-token index of audit rows and ledger entries: pruned with them
      byToken: own.byToken.getKeysCount(),
      archiveDays: fs.existsSync(path.join(dataDir, 'archive')) ? fs.readdirSync(path.join(dataDir, 'archive')).length : 0,
    };
  } finally {
    if (!db) void own.close();
  }
}

async function neverUsed(s: { baseUrl: string }, token: string): Promise<number> {
  const me = await (await fetch(`${s.baseUrl}/v1/me`, { headers: bearer(token) })).json();
  return me.usage.find((u: any) => u.module_id === 'rgb_liveness').used;
}

async function waitLog(s: ServerHandle, pred: (l: any) => boolean, ms = 30_000): Promise<any> {
  return waitFor(() => s.logLines().find(pred), { timeoutMs: ms, intervalMs: 100, what: 'a log line' }).catch(() => undefined);
}

t.test('each kind is pruned after its own period; the ledger verifies and usage stays', async (t) => {
  setClock(T0);
  // the calls and the CLI's passes against the service's API in process (test/helpers/api.ts:
  // the real app, engine, demo archive and LMDB store, CLOCK_FILE its clock; issue 43: this was
  // a first started server); the service's own pruner at start below is a real server's
  const api = await startApi({ dataDir, engine: 'real', env, ready: true });
  t.teardown(() => api.stop());
  const apiDb = api.lmdb!.db as unknown as Databases;
  const { token } = await makeToken(api, ['rgb_liveness:100:never'], ['--demo']);
  for (const id of ['r-1', 'r-2', 'fail-1']) await postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id })]));
  t.equal(await neverUsed(api, token), 2, 'two charged, the failed one refunded');
  // the audit line is written after the answer: wait for all three, bounded
  await waitFor(() => counts(apiDb).audit >= 3, { timeoutMs: 10_000, what: 'three audit rows' }).catch(() => undefined);
  t.same(counts(apiDb), { audit: 3, results: 2, ledger: 4, byToken: 7, archiveDays: 1 }, 'three audit rows, two results, charge+charge+charge+refund, one archive day, an index entry for each row');

  // a verdict-signing key retired now: its file (private part included) goes 30 days later,
  // with no rotation after it (only the next rotation deleted it)
  const rotated = await api.cli(['keys', 'rotate']);
  t.equal(rotated.code, 0, rotated.stderr);
  const keyFile = (kid: string) => path.join(dataDir, 'keys', `${kid}.json`);
  setClock(T0 + 30 * DAY - 60_000);
  let r = await api.cli(['retention', 'prune']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { signing_keys: 0 }, 'a key retired less than 30 days ago is kept');
  t.ok(fs.existsSync(keyFile(rotated.json.retired)));

  // defaults: archive 30 days, results 90, audit and ledger 400
  setClock(T0 + 30 * DAY);
  r = await api.cli(['retention', 'prune']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { audit: 0, results: 0, ledger: 0, archive: 0, signing_keys: 1 }, 'the archive day is not 30 whole days old yet; the retired key is 30 days retired');
  t.notOk(fs.existsSync(keyFile(rotated.json.retired)), 'the retired key\'s file is gone');
  t.ok(fs.existsSync(keyFile(rotated.json.kid)), 'the current key\'s is not');
  setClock(T0 + 31 * DAY);
  r = await api.cli(['retention', 'prune']);
  t.match(r.json, { audit: 0, results: 0, ledger: 0, archive: 3, signing_keys: 0 }, 'the face images go after 30 days');
  t.equal(counts(apiDb).archiveDays, 0);

  setClock(T0 + 91 * DAY);
  r = await api.cli(['retention', 'prune']);
  t.match(r.json, { audit: 0, results: 2, ledger: 0, archive: 0 });

  // a kind set to 0 is kept for ever
  setClock(T0 + 401 * DAY);
  const keepAll = await runCli(dataDir, ['retention', 'prune'], '', { ...env, RETENTION_AUDIT_DAYS: '0', RETENTION_LEDGER_DAYS: '0' });
  t.same(keepAll.json.audit, null);
  t.same(keepAll.json.ledger, null);
  t.equal(counts(apiDb).audit, 3);
  // a key retired 31 days before the service starts
  setClock(T0 + 370 * DAY);
  const lateRotation = await api.cli(['keys', 'rotate']);
  t.equal(lateRotation.code, 0, lateRotation.stderr);
  setClock(T0 + 401 * DAY);
  await api.stop();

  // the service's own pruner: at start (then hourly), with the default periods
  const s = await startServer({ dataDir, env, ready: true });
  t.teardown(() => s.stop());
  const line = await waitLog(s, (l) => l.msg === 'retention: pruned');
  t.match(line?.pruned, { audit: 3, ledger: 4, signing_keys: 1 }, 'the service pruned audit and ledger past 400 days, and the key retired 31 days ago');
  t.notOk(fs.existsSync(keyFile(lateRotation.json.retired)), 'its file is gone');
  t.same(counts(), { audit: 0, results: 0, ledger: 0, byToken: 0, archiveDays: 0 }, 'the per-token index went with the rows (it kept every entry for ever)');

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
