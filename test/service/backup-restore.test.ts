import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { makeToken, runCli, startServer, tempDir } from '../helpers/server.ts';
import { settledState, waitFor } from '../helpers/wait.ts';
import { hashToken } from '../../src/auth/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { markRunning } from '../../src/lifecycle.ts';
import type { Logger } from '../../src/observability/index.ts';
import { startupHooks } from '../../src/startup.ts';
import { openConfiguredStore } from '../../src/store/index.ts';
import { call, usedBy, world } from '../verify/world.ts';

// Backup taken from a running service with a verify call in flight, restored by the
// documented procedure (docs/operations.md "Backup and restore") into a fresh DATA_DIR, served again
// (in process on the restored store: what the backup must carry is the store's content; the
// transport is the same as for any store).
//
// The running service is a real server: the backup is read while another process writes the
// store, and restore reads the running mark its process leaves. Its DATA_DIR also holds security
// issue 29's check (was test/service/private-files.test.ts, a server start of its own; issue 43):
// under `npm start` from a shell with the usual umask 022, the LMDB store, the demo images and
// the rest of DATA_DIR were readable by every account on the host. The server (and the CLI
// beside it) is started here with umask 022, as such a shell would, in a DATA_DIR made
// beforehand with mode 0755 (`mkdir data`); after a demo verify call, a key rotation and a
// backup, every folder under DATA_DIR must be 0700 and every file 0600.

// the child processes (server and CLI) inherit the umask of this test process
process.umask(0o022);

/** Every entry under `dir` (itself included) with its permission bits. */
function modes(dir: string): { path: string; dir: boolean; mode: number }[] {
  const out = [{ path: dir, dir: true, mode: fs.statSync(dir).mode & 0o777 }];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(e.parentPath, e.name);
    out.push({ path: p, dir: e.isDirectory(), mode: fs.lstatSync(p).mode & 0o777 });
  }
  return out;
}

t.test('a backup of the live store, restored, serves the same tokens, usage and replays; DATA_DIR is 0700 and every file in it 0600, whatever the umask', async (t) => {
  const env = { TEST_INFERENCE_DELAY_MS: '10000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' };
  const dataDir = path.join(tempDir(), 'data');
  fs.mkdirSync(dataDir, { mode: 0o755 });
  t.equal(fs.statSync(dataDir).mode & 0o777, 0o755, 'precondition: the operator\'s DATA_DIR is world-readable');
  const a = await startServer({ dataDir, env, ready: true });
  t.teardown(() => a.stop());
  const { id, token } = await makeToken(a, ['rgb_liveness:10:never']);
  const bodies = [request([single({ id: 'b-1' })]), request([single({ id: 'b-2', seed: 7 })])];
  const first = await postVerify(a.baseUrl, token, 'rgb_liveness', bodies[0]!, { 'idempotency-key': 'key-1' });
  const second = await postVerify(a.baseUrl, token, 'rgb_liveness', bodies[1]!, { 'idempotency-key': 'key-2' });
  t.equal(first.status, 200);
  t.equal(second.status, 200);

  // a call still in inference while the copy is made (held 10 s by the test delay, several
  // times what the CLI takes to start and copy on a loaded machine: 2.8 s at a load of 12 on
  // 2 cores): its reservation is pending in the copy. The copy is restored into another
  // DATA_DIR and served while this server still runs: the pending reservation names this live
  // process, yet nothing in the restored store's future will settle it, so restore marks it
  // held by no process and the restored store's first start refunds it (it stayed pending, its
  // key answering 409 for ever, until the restore did so).
  const slow = postVerify(a.baseUrl, token, 'rgb_liveness', request([single({ id: 'slow-1' })]), { 'idempotency-key': 'key-3' });
  const slowState = settledState(slow);
  const db = lmdbOpen(a.dataDir);
  t.ok(await waitFor(() => [...db.reservations.getRange({})].some((e: any) => e.value.state === 'pending'), { what: 'a pending reservation' }), 'a reservation is pending during the backup');
  await db.close();

  const file = path.join(tempDir('lv-backup-'), 'store.mdb');
  const backup = await a.cli(['backup', file]);
  t.notOk(slowState.settled, 'the call was still in flight when the copy was made (else the test delay is too short)');
  t.equal(backup.code, 0, backup.stderr);
  t.equal(backup.json.file, file);
  t.ok(fs.statSync(file).size > 0);
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'the copy is private (it holds token hashes and results)');
  const again = await a.cli(['backup', file]);
  t.equal(again.code, 2, 'an existing file is never overwritten');
  t.match(again.stderr, /exists/);
  // restore refuses the DATA_DIR of a running server: the mark its process leaves
  // (src/lifecycle.ts, written by src/main.ts) names it (was test/cli/restore-cli.test.ts's)
  const refused = await a.cli(['restore', file]);
  t.equal(refused.code, 4, 'restore on a running server: conflict');
  t.match(refused.stderr, /a server \(pid \d+, started .*\) already runs on DATA_DIR .*; nothing was restored/);
  t.equal((await slow).status, 200, 'the service went on serving during the backup');
  // a second server on the same DATA_DIR is refused before it touches anything; it used to
  // overwrite the mark and remove it on its way out, and restore then ran under the live server
  await t.rejects(startServer({ dataDir, env }), /server exited with 1:[\s\S]*a server \(pid \d+, started .*\) already runs on DATA_DIR .*: one server per DATA_DIR/);
  t.equal((await a.cli(['restore', file])).code, 4, 'and restore still refuses: the live server\'s mark is there');

  // DATA_DIR private (security issue 29): a demo token's upload is archived under
  // DATA_DIR/archive; then a key rotation and a backup into DATA_DIR
  const demo = await makeToken(a, ['rgb_liveness:100:day'], ['--demo']);
  const archived = await postVerify(a.baseUrl, demo.token, 'rgb_liveness', request([single({ id: 'private-1' })]), { 'idempotency-key': 'private-1' });
  t.equal(archived.status, 200, archived.text);
  const rotated = await a.cli(['keys', 'rotate']);
  t.equal(rotated.code, 0, rotated.stderr);
  const inside = await a.cli(['backup', path.join(dataDir, 'backup.mdb')]);
  t.equal(inside.code, 0, inside.stderr);
  const all = modes(dataDir);
  const rel = (p: string) => path.relative(dataDir, p) || '.';
  const names = all.map((e) => rel(e.path));
  // what the walk must have reached, so that an empty or partial folder cannot pass
  for (const want of ['store/data.mdb', 'store/lock.mdb', 'keys/current', `keys/${rotated.json.kid}.json`, `keys/${rotated.json.retired}.json`, 'backup.mdb']) {
    t.ok(names.includes(want), `${want} exists`);
  }
  t.ok(names.some((n) => /^archive\/\d{4}-\d{2}-\d{2}\/[^/]+\/part-000\.bin$/.test(n)), 'the demo image is archived');
  t.ok(names.some((n) => /^archive\/.+\/metadata\.json$/.test(n)), 'with its metadata');
  const open = all.filter((e) => e.mode !== (e.dir ? 0o700 : 0o600)).map((e) => `${rel(e.path)} ${e.mode.toString(8)}`);
  t.same(open, [], 'folders 0700, files 0600');
  t.equal(fs.statSync(dataDir).mode & 0o777, 0o700, 'DATA_DIR itself is 0700');

  // restore, as documented, into a fresh DATA_DIR while the server it was taken from runs on
  const restored = tempDir('lv-restored-');
  const back = await runCli(restored, ['restore', file]);
  t.equal(back.code, 0, back.stderr);
  t.equal(back.json.in_flight_released, 1, 'the call in flight in the copy is released');
  t.ok(back.json.records_read > 0, 'every record of the backup was read first');
  t.ok(fs.existsSync(path.join(restored, 'keys', 'current')), 'the signing keys came with it');
  // a server cannot start on a DATA_DIR while a restore holds it (the restore above has ended:
  // its mark, held here by this process as restore holds it, stands in for one still running)
  const busy = tempDir('lv-restoring-');
  const unmark = await markRunning(busy, 'restore');
  await t.rejects(startServer({ dataDir: busy, env }), /server exited with 1:[\s\S]*a restore \(pid \d+, started .*\) already runs on DATA_DIR/, 'a server started during a restore is refused');
  unmark();

  // The restored DATA_DIR served again, in process (issue 43: this was a second server start):
  // the store opened as the service opens it, the start-up hooks every start runs first
  // (src/startup.ts: the signing key, crash recovery), then the verify use case on that store
  // (test/verify/world.ts) answering the same tokens, usage and replays.
  const config = loadConfig({ DATA_DIR: restored, ...env });
  const store = await openConfiguredStore(config);
  t.teardown(() => store.close());
  const logged: string[] = [];
  const log = { info: () => {}, warn: (_: unknown, msg: string) => void logged.push(msg), error: () => {} } as unknown as Logger;
  await (await startupHooks(store, config, log)).firstPrune;
  t.ok(logged.some((msg) => /crash recovery/.test(msg)), 'the call pending in the copy was recovered (refunded) at start, its server still running');
  t.equal(a.proc.exitCode, null, 'precondition: the server the backup was taken from is still running');
  const w = world(store);
  w.clock.at = Date.now();

  const tokenRecord = await store.getTokenByHash(hashToken(token));
  t.equal(tokenRecord?.id, id, 'the same token authenticates');
  t.equal(await usedBy(w, tokenRecord!), 2, 'usage as of the backup: two charged, the in-flight one refunded by recovery');
  t.equal((await store.getToken(id))?.id, id, 'token show finds it');

  for (const [i, key] of ['key-1', 'key-2'].entries()) {
    const replay = await call(w, token, bodies[i]!, { idempotencyKey: key });
    t.equal(replay.headers?.['Idempotency-Replayed'], 'true', `${key} replays`);
    t.equal(replay.body, [first, second][i]!.text, `${key}: the same bytes`);
  }
  t.equal((await store.verifyLedger()).ok, true, 'the restored ledger verifies');
});
