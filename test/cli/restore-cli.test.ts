import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken, ROOT, runChild, runCli, tempDir } from '../helpers/server.ts';
import { FROM_BUILD } from '../helpers/from-build.ts';
import { waitFor } from '../helpers/wait.ts';
import { markRunning } from '../../src/lifecycle.ts';

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
  const fresh = path.join(tempDir(), 'fresh');
  t.equal((await runCli(fresh, ['restore', path.join(dataDir, 'nope.mdb')])).code, 2);
  t.notOk(fs.existsSync(fresh), 'a missing backup file: DATA_DIR is not made either');
});

/** A backup of a small store made through the CLI (a token and its grant: some pages of
 * several trees), in a folder of its own. */
async function smallBackup(t: Test): Promise<{ file: string; dataDir: string }> {
  const dataDir = tempDir();
  t.equal((await runCli(dataDir, ['token', 'create', '--name', 'pages', '--grant', 'rgb_liveness:10:never'])).code, 0);
  const file = path.join(tempDir('lv-backup-'), 'store.mdb');
  const b = await runCli(dataDir, ['backup', file]);
  t.equal(b.code, 0, b.stderr);
  return { file, dataDir };
}

t.test('restore reads the whole backup first: damaged pages or a file cut short are refused, and nothing changes', async (t) => {
  const { file } = await smallBackup(t);
  const pages = fs.statSync(file).size / 4096;
  t.ok(pages >= 4, `the backup has pages to damage (${pages})`);
  // pages 2 on (0 and 1 are the meta pages, which open() reads and would refuse by themselves)
  const damaged = path.join(tempDir(), 'damaged.mdb');
  const bytes = fs.readFileSync(file);
  for (let i = 2 * 4096; i < bytes.length; i++) bytes[i] = (i * 7919) & 0xff;
  fs.writeFileSync(damaged, bytes);
  const cut = path.join(tempDir(), 'cut.mdb');
  fs.writeFileSync(cut, fs.readFileSync(file).subarray(0, 2 * 4096));
  for (const [what, backup] of [['damaged pages', damaged], ['cut short', cut]] as const) {
    const dataDir = tempDir();
    t.equal((await runCli(dataDir, ['token', 'create', '--name', 'before', '--grant', 'rgb_liveness:10:never'])).code, 0);
    const before = fs.readFileSync(path.join(dataDir, 'store', 'data.mdb'));
    const r = await runCli(dataDir, ['restore', backup]);
    t.equal(r.code, 2, `${what}: refused as a usage error (${r.stderr.trim()})`);
    t.match(r.stderr, /is not a whole, readable store/, what);
    t.same(fs.readdirSync(dataDir).filter((n) => n !== 'keys').sort(), ['store'], `${what}: the store stays, nothing is left beside it (no .restore-*, no before-restore)`);
    t.ok(fs.readFileSync(path.join(dataDir, 'store', 'data.mdb')).equals(before), `${what}: the store is untouched`);
  }
  const good = tempDir();
  const ok = await runCli(good, ['restore', file]);
  t.equal(ok.code, 0, ok.stderr);
  t.ok(ok.json.records_read > 0, `the whole backup was read (${ok.json.records_read} records)`);
});

t.test('restore holds DATA_DIR\'s mark while it runs; backup refuses a DATA_DIR with no store, and a missing folder', async (t) => {
  const { file, dataDir: source } = await smallBackup(t);
  const dataDir = tempDir();
  // the mark (DATA_DIR/server.json) appears during the restore and is gone after it
  const seen: string[] = [];
  const watcher = fs.watch(dataDir, (_event, name) => {
    if (name === 'server.json') seen.push(fs.existsSync(path.join(dataDir, 'server.json')) ? fs.readFileSync(path.join(dataDir, 'server.json'), 'utf8') : '');
  });
  t.teardown(() => watcher.close());
  const r = await runCli(dataDir, ['restore', file]);
  t.equal(r.code, 0, r.stderr);
  await waitFor(() => seen.some((s) => /"role":"restore"/.test(s)), { what: 'the restore\'s mark' });
  t.pass('a server started meanwhile would have been refused (test/service/backup-restore.test.ts starts one against the mark)');
  t.notOk(fs.existsSync(path.join(dataDir, 'server.json')), 'the mark is removed after');

  // a server's start is refused while a restore holds the mark, and models status says no
  // server runs (the mark is the restore's)
  const held = tempDir();
  const unmark = await markRunning(held, 'restore');
  const status = await runCli(held, ['models', 'status']);
  unmark();
  t.equal(status.code, 0, status.stderr);
  t.equal(status.json.running, false, 'models status: a restore is not a server');

  // the commands that only read an LMDB store refuse a DATA_DIR without one (a mistyped one)
  // rather than create an empty store and report on it (ledger verify said ok, 0 entries)
  const typo = path.join(tempDir(), 'no-such-data');
  for (const args of [['backup', path.join(tempDir(), 'x.mdb')], ['ledger', 'verify'], ['ledger', 'list'], ['audit', 'list'], ['settlements', 'list'], ['token', 'list'], ['usage'], ['retention', 'prune']]) {
    const none = await runCli(typo, args);
    t.equal(none.code, 5, `${args.join(' ')}: no store there, the store cannot be opened (${none.stderr.trim()})`);
    t.match(none.stderr, /no store at .*: is DATA_DIR right\?/);
    t.notOk(fs.existsSync(path.join(typo, 'store')), `${args.join(' ')}: and none was created`);
  }

  const missing = path.join(tempDir(), 'no-folder', 'x.mdb');
  const nofolder = await runCli(source, ['backup', missing]);
  t.ok(nofolder.code !== 0, 'a backup into a folder that does not exist is refused');
  t.match(nofolder.stderr, /cannot write beside .*x\.mdb: ENOENT.*; nothing was written/);
  t.notOk(fs.existsSync(path.dirname(missing)), 'and the folder is not made');
});

t.test('under ulimit -v, restore opens its copy with LMDB_MAP_SIZE_GIB as every command does', async (t) => {
  if (!FROM_BUILD) return t.plan(0, 'the compiled CLI is what runs under the limit (tsx itself does not start there); npm test builds it');
  const { file } = await smallBackup(t);
  const dataDir = tempDir();
  const env = { ...process.env, DATA_DIR: dataDir, LMDB_MAP_SIZE_GIB: '4' };
  // about 7.6 GiB of address space: a 4 GiB map fits, the default 1 TiB does not
  const r = await runChild('bash', ['-c', `ulimit -v 8000000 && exec "${process.execPath}" dist/src/cli/main.js restore "${file}"`], { cwd: ROOT, env, limitMs: 120_000 });
  t.equal(r.code, 0, `restored (it opened its copy with the default 1 TiB map and blamed the backup): ${r.stderr.trim().slice(0, 300)}`);
});
