import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, startServer, tempDir } from '../helpers/server.ts';
import { settledState, waitFor } from '../helpers/wait.ts';

// Backup taken from a running service with a verify call in flight, restored by the
// documented procedure (docs/operations.md "Backup and restore") into a fresh DATA_DIR, served again.

t.test('a backup of the live store, restored, serves the same tokens, usage and replays', async (t) => {
  const env = { TEST_INFERENCE_DELAY_MS: '10000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' };
  const a = await startServer({ env, ready: true });
  t.teardown(() => a.stop());
  const { id, token } = await makeToken(a, ['rgb_liveness:10:never']);
  const bodies = [request([single({ id: 'b-1' })]), request([single({ id: 'b-2', seed: 7 })])];
  const first = await postVerify(a.baseUrl, token, 'rgb_liveness', bodies[0]!, { 'idempotency-key': 'key-1' });
  const second = await postVerify(a.baseUrl, token, 'rgb_liveness', bodies[1]!, { 'idempotency-key': 'key-2' });
  t.equal(first.status, 200);
  t.equal(second.status, 200);

  // a call still in inference while the copy is made (held 10 s by the test delay, several
  // times what the CLI takes to start and copy on a loaded machine: 2.8 s at a load of 12 on
  // 2 cores): its reservation is pending in the copy. The delay is waited out before the
  // restore: recovery refunds only a reservation whose process is gone, so the restored
  // service starts once this one has stopped.
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
  t.equal((await slow).status, 200, 'the service went on serving during the backup');
  await a.stop();

  // restore: the copy becomes DATA_DIR/store/data.mdb; the signing keys travel separately
  const restored = tempDir('lv-restored-');
  fs.mkdirSync(path.join(restored, 'store'));
  fs.copyFileSync(file, path.join(restored, 'store', 'data.mdb'));
  fs.cpSync(path.join(a.dataDir, 'keys'), path.join(restored, 'keys'), { recursive: true });

  const b = await startServer({ dataDir: restored, env, ready: true });
  t.teardown(() => b.stop());
  t.ok(b.logLines().some((l) => /crash recovery/.test(l.msg ?? '')), 'the call pending in the copy was recovered (refunded) at start');

  const me = await fetch(`${b.baseUrl}/v1/me`, { headers: bearer(token) });
  t.equal(me.status, 200, 'the same token authenticates');
  const usage = (await me.json()).usage.find((u: any) => u.module_id === 'rgb_liveness');
  t.equal(usage.used, 2, 'usage as of the backup: two charged, the in-flight one refunded by recovery');
  // two read-only CLI runs, started together; the ledger is judged after the replays below
  // (which charge nothing)
  const [list, verify] = await Promise.all([b.cli(['token', 'show', id]), b.cli(['ledger', 'verify'])]);
  t.equal(list.json.id, id);

  for (const [i, key] of ['key-1', 'key-2'].entries()) {
    const replay = await postVerify(b.baseUrl, token, 'rgb_liveness', bodies[i]!, { 'idempotency-key': key });
    t.equal(replay.headers.get('idempotency-replayed'), 'true', `${key} replays`);
    t.equal(replay.text, [first, second][i]!.text, `${key}: the same bytes`);
  }
  t.equal(verify.code, 0);
  t.equal(verify.json.ok, true, 'the restored ledger verifies');
});
