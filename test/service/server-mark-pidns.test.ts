import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { reserveInput, tokenRecord } from '../../bench/harness/records.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { currentProcess } from '../../src/store/index.ts';
import { MARK_STALE_REFRESHES } from '../../src/lifecycle.ts';
import { CLI_ARGS, ROOT, runChild, runCli, startServer, tempDir } from '../helpers/server.ts';
import { missingTool } from '../helpers/required.ts';

// DATA_DIR/server.json marks the server that runs on a DATA_DIR: restore refuses it (exit 4) and
// a second server is refused. The mark named the server by pid and start time, which mean
// something only in the reader's own PID namespace: a server in a container is pid 1 of its
// own, read from the host as the host's init (another start time: a crashed server) and from
// another container as the reader itself (ignored). restore then ran under the live server,
// deleting its mark and moving its store aside, and a second server started beside it. Marks
// now say their PID namespace and boot; one of another namespace counts while its holder
// refreshes it.

const mark = (dataDir: string) => path.join(dataDir, 'server.json');
const UNSHARE = ['unshare', '--pid', '--fork', '--mount-proc'];
const unshareWorks = process.getuid?.() === 0 && spawnSync(UNSHARE[0]!, [...UNSHARE.slice(1), 'true']).status === 0;

/** a store with a token, and a backup of it */
async function storeAndBackup(): Promise<{ dataDir: string; file: string }> {
  const dataDir = tempDir();
  const made = await runCli(dataDir, ['token', 'create', '--name', 'ns', '--grant', 'rgb_liveness:1:never']);
  if (made.code !== 0) throw new Error(made.stderr);
  const file = path.join(tempDir('lv-backup-'), 'b.mdb');
  const b = await runCli(dataDir, ['backup', file]);
  if (b.code !== 0) throw new Error(b.stderr);
  return { dataDir, file };
}

t.test('a server in a PID namespace of its own: restore and a second server refused, its in-flight call kept', async (t) => {
  if (!unshareWorks) return missingTool(t, 'needs root and unshare (util-linux) to start a server in a PID namespace of its own');
  const { dataDir, file } = await storeAndBackup();
  const a = await startServer({ dataDir, prefix: UNSHARE, env: { WORKERS: '1' } });
  t.teardown(() => a.stop('SIGKILL'));
  const held = JSON.parse(fs.readFileSync(mark(dataDir), 'utf8'));
  t.equal(held.pid, 1, 'the server is pid 1 of its namespace, as in a container');
  t.not(held.pid_ns, currentProcess().pid_ns, 'its mark names its namespace');

  // a call the server has in flight: its reservation, pending, names it
  const store = LmdbBackend.open(dataDir);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await store.insertToken(tok);
  const out = await store.reserve(reserveInput(tok, { at: Date.now() }));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  const inFlight = { ...out.reservation, pid: held.pid, pid_start: held.pid_start, pid_ns: held.pid_ns, boot_id: held.boot_id };
  await store.store.db.reservations.put(inFlight.id, inFlight);

  await t.rejects(startServer({ dataDir, env: { WORKERS: '1' } }), /server exited with 1:[\s\S]*a server \(pid 1 in another PID namespace.*already runs on DATA_DIR/, 'a second server is refused, before it opens the store');
  t.equal((await store.getReservation(inFlight.id))!.state, 'pending', 'so its crash recovery did not refund the live server\'s call');

  const fromHost = await runCli(dataDir, ['restore', file]);
  t.equal(fromHost.code, 4, `restore from the host is refused: ${fromHost.stderr.trim()}`);
  t.match(fromHost.stderr, /a server \(pid 1 in another PID namespace, which refreshes its mark, started .*\) already runs on DATA_DIR.*nothing was restored/);
  // a second container on the same volume: the restore is pid 1 of a namespace of its own
  const fromOther = await runChild(UNSHARE[0]!, [...UNSHARE.slice(1), process.execPath, ...CLI_ARGS, 'restore', file], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir }, limitMs: 120_000 });
  t.equal(fromOther.code, 4, `restore from another namespace is refused: ${fromOther.stderr.trim()}`);
  t.same(fs.existsSync(mark(dataDir)) ? JSON.parse(fs.readFileSync(mark(dataDir), 'utf8')) : null, held, 'the server\'s mark is left as it was');
  t.same(fs.readdirSync(dataDir).filter((n) => n.includes('before-restore')), [], 'its store was not moved aside');

  t.equal((await fetch(`${a.baseUrl}/health/live`)).status, 200, 'the server still answers');

  t.equal(await a.stop(), 0, 'it stops cleanly');
  t.notOk(fs.existsSync(mark(dataDir)), 'and takes its mark with it');
  // the next start (a container started again is a namespace of its own): the call of the one
  // before is refunded, not held for ever
  t.same((await store.recoverPending(Date.now())).map((r) => r.id), [inFlight.id], 'recovery refunds the call of a server of another namespace that is gone');
});

t.test('a mark of another namespace that is not refreshed (its container crashed): waited for until stale, then replaced', async (t) => {
  const { dataDir, file } = await storeAndBackup();
  const me = currentProcess();
  // the identity of a server in a container: pid 1 of a namespace that is not ours
  const crashed = (over: Record<string, unknown>) => ({ pid: 1, pid_start: '12345', pid_ns: '1', boot_id: me.boot_id, started_at: new Date().toISOString(), refresh_ms: 5000, ...over });
  const plant = (m: Record<string, unknown>, ageMs: number) => {
    fs.writeFileSync(mark(dataDir), `${JSON.stringify(m)}\n`);
    const at = new Date(Date.now() - ageMs);
    fs.utimesSync(mark(dataDir), at, at);
  };

  // fresh: a server that runs, for a reader that looks once
  plant(crashed({}), 0);
  t.equal((await runCli(dataDir, ['models', 'status'])).json.running, true, 'models status: a fresh mark of another namespace is a running server');
  // stale: last refreshed longer ago than its stale time, a crashed server's
  plant(crashed({}), 5000 * MARK_STALE_REFRESHES + 1000);
  t.equal((await runCli(dataDir, ['models', 'status'])).json.running, false, 'models status: a stale one is not');
  const r1 = await runCli(dataDir, ['restore', file]);
  t.equal(r1.code, 0, `restore replaces a stale mark at once: ${r1.stderr.trim()}`);

  // fresh when the restore looks, never refreshed after: the restore watches it go stale
  // (its holder says it refreshes every 100 ms) and then runs
  plant(crashed({ refresh_ms: 100 }), 0);
  const r2 = await runCli(dataDir, ['restore', file]);
  t.equal(r2.code, 0, `restore runs once a fresh mark has gone stale unrefreshed: ${r2.stderr.trim()}`);
  t.notOk(fs.existsSync(mark(dataDir)), 'its own mark gone after it');

  // of our namespace (a pid that is not running): judged by its pid at once, as before
  plant({ ...crashed({}), pid_ns: me.pid_ns, pid: 2 ** 22 + 1 }, 0);
  const r3 = await runCli(dataDir, ['restore', file]);
  t.equal(r3.code, 0, `a mark of our namespace whose process is gone is replaced at once: ${r3.stderr.trim()}`);
});
