import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken, runCli, tempDir } from '../helpers/server.ts';

// Issue 25: `restore` puts a backup and its signing keys back into a stopped DATA_DIR,
// refusing a running one, moving what was there aside instead of deleting it.
// Both services here are the service's app in process (test/helpers/api.ts: its real start-up
// steps make the store and the signing key, its routes publish the keys and authenticate
// tokens; issue 43: these were two server starts). The second serves a copy of the restored
// DATA_DIR, so that no LMDB store is opened twice by path in this process (see
// test/helpers/api.ts): what the restore must bring back is the content, store and keys. That
// restore refuses the DATA_DIR of a running server reads the mark a real server's process
// leaves (src/lifecycle.ts, written by src/main.ts): test/service/backup-restore.test.ts checks
// it on its running server.

t.test('backup carries the keys; restore restores store and keys', async (t) => {
  const a = await startApi();
  t.teardown(() => a.stop());
  const kept = await makeToken(a, ['rgb_liveness:10:never']);
  const kids = async (base: string) => (await (await fetch(`${base}/.well-known/jwks.json`)).json()).keys.map((k: { kid: string }) => k.kid).sort();
  const before = await kids(a.baseUrl);
  const file = path.join(tempDir('lv-backup-'), 'store.mdb');
  const backup = await a.cli(['backup', file]);
  t.equal(backup.code, 0, backup.stderr);
  t.match(backup.json, { file, keys: { dir: `${file}.keys` } });
  t.ok(backup.json.keys.files >= 2, 'the key files (key and current pointer) travel with the backup');
  t.equal(fs.statSync(`${file}.keys`).mode & 0o777, 0o700);
  for (const f of fs.readdirSync(`${file}.keys`)) t.equal(fs.statSync(path.join(`${file}.keys`, f)).mode & 0o777, 0o600, `${f} is private`);

  // changes after the backup: a token, and a new signing key
  const later = await makeToken(a, ['rgb_liveness:10:never']);
  t.equal((await a.cli(['keys', 'rotate'])).code, 0);

  await a.stop();

  const restored = await runCli(a.dataDir, ['restore', file]);
  t.equal(restored.code, 0, restored.stderr);
  t.match(restored.json, { restored: file, store: path.join(a.dataDir, 'store'), previous_store: /store\.before-restore-/, keys: { restored_from: `${file}.keys`, previous_keys: /keys\.before-restore-/ } });
  t.ok(fs.existsSync(path.join(restored.json.previous_store, 'data.mdb')), 'the replaced store is kept');

  const copy = path.join(tempDir(), 'data');
  fs.cpSync(a.dataDir, copy, { recursive: true });
  const b = await startApi({ dataDir: copy });
  t.teardown(() => b.stop());
  t.equal((await fetch(`${b.baseUrl}/v1/me`, { headers: bearer(kept.token) })).status, 200, 'a token from before the backup works');
  t.equal((await fetch(`${b.baseUrl}/v1/me`, { headers: bearer(later.token) })).status, 401, 'one made after it is gone with the restore');
  t.same(await kids(b.baseUrl), before, 'the keys published are those of the backup');
  t.equal((await b.cli(['ledger', 'verify'])).code, 0);
});

t.test('restore refuses what is not a backup, and changes nothing', async (t) => {
  const dataDir = tempDir();
  const junk = path.join(tempDir(), 'junk.mdb');
  fs.writeFileSync(junk, '');
  const r = await runCli(dataDir, ['restore', junk]);
  t.equal(r.code, 2);
  t.match(r.stderr, /is not an LMDB store/);
  t.notOk(fs.existsSync(path.join(dataDir, 'store')), 'no store made');
  t.equal((await runCli(dataDir, ['restore', path.join(dataDir, 'nope.mdb')])).code, 2);
});
