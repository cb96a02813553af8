import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { renameAll } from '../../src/store/lmdb/backup.ts';
import { startApi } from '../helpers/api.ts';
import { ensureSigningKey, rotateSigningKey, type KeyFile } from '../../src/signing/index.ts';
import { publicPart, setKeysLockHook } from '../../src/signing/keys.ts';
import { processStartTime } from '../../src/store/owner.ts';
import { CLI_ARGS, ROOT, runCli, tempDir } from '../helpers/server.ts';
import { settledState } from '../helpers/wait.ts';

// Security issue 40, findings 4 and 5: `restore` of a backup taken before `keys revoke`
// brought the revoked (leaked) key back, current and published; and `restore` trusted the
// backup's keys folder (it followed a symlink to /etc/passwd, and a folder inside failed it
// half-way, after the store was swapped). Through the real CLI on a real DATA_DIR.
// The DATA_DIR is made, and its keys published after the restore are read, by the service's
// app in process (test/helpers/api.ts: its real start-up steps make the signing key and its
// JWKS route publishes the keys folder; issue 43: these were two server starts). The second
// serves a copy of the restored DATA_DIR, so that no LMDB store is opened twice by path in
// this process (see test/helpers/api.ts); what a restore has to bring back is the content.

const published = async (base: string) => (await (await fetch(`${base}/.well-known/jwks.json`)).json()).keys.map((k: { kid: string }) => k.kid);
const keysOf = async (dataDir: string) => {
  const r = await runCli(dataDir, ['keys', 'list']);
  return r.json.keys as { kid: string; current: boolean; published: boolean; revoked_at?: string }[];
};

/** Every name under DATA_DIR with its size and mtime: "nothing changed" compared whole. */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const st = fs.lstatSync(p);
      // lock.mdb is rewritten by any opener; data.mdb and the keys are what a restore swaps
      if (name === 'lock.mdb') continue;
      out.push(`${path.relative(dir, p)} ${st.isDirectory() ? 'dir' : `${st.size} ${st.mtimeMs}`}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

const a = await startApi();
const backups = tempDir('lv-backup-');
const file = path.join(backups, 'before-revoke.mdb');
const made = await a.cli(['backup', file]);
const leaked = (await keysOf(a.dataDir)).find((k) => k.current)!.kid;
const revoked = await a.cli(['keys', 'revoke', leaked, '--by', 'incident 7']);
const after = (await keysOf(a.dataDir)).find((k) => k.current)!.kid;
await a.stop();
// (asserted after the set-up's last await: tap ends a root test that goes idle after one)
t.equal(made.code, 0, made.stderr);
t.equal(revoked.code, 0, revoked.stderr);
t.not(after, leaked, 'the revocation made a new current key');

/** A copy of the backup (file and keys folder) to tamper with. */
function copyOfBackup(name: string): string {
  const copy = path.join(backups, `${name}.mdb`);
  fs.copyFileSync(file, copy);
  fs.cpSync(`${file}.keys`, `${copy}.keys`, { recursive: true });
  return copy;
}

t.test('a revoked key stays revoked across a restore of a backup taken before the revocation', async (t) => {
  const r = await runCli(a.dataDir, ['restore', file]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.keys.kept_revocations, [leaked], 'the restore reports the revocation it kept');
  t.equal(r.json.keys.current_from, 'data_dir');
  t.equal(r.json.keys.current, after, 'the key made by the revocation signs');
  t.match(r.stderr, new RegExp(`kept revoked .*${leaked}`));
  const keys = await keysOf(a.dataDir);
  const old = keys.find((k) => k.kid === leaked)!;
  t.ok(old.revoked_at, 'the leaked key is listed as revoked');
  t.notOk(old.current || old.published, 'neither current nor published');
  t.equal(keys.find((k) => k.current)!.kid, after);
  const record = JSON.parse(fs.readFileSync(path.join(a.dataDir, 'keys', `${leaked}.json`), 'utf8'));
  t.equal(record.jwk.d, undefined, 'no private part of the leaked key is back on disk');
  t.equal(record.revoked_by, 'incident 7');

  const copy = path.join(tempDir(), 'data');
  fs.cpSync(a.dataDir, copy, { recursive: true });
  const b = await startApi({ dataDir: copy });
  t.teardown(() => b.stop());
  const jwks = await published(b.baseUrl);
  t.notOk(jwks.includes(leaked), 'the JWKS does not publish it');
  t.ok(jwks.includes(after), 'it publishes the key that signs');
});

t.test('restored into a DATA_DIR with no keys, the backup\'s keys come back as they were (nothing to keep)', async (t) => {
  const fresh = tempDir();
  const r = await runCli(fresh, ['restore', file]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.keys.kept_revocations, []);
  t.equal(r.json.keys.current, leaked, 'nothing in DATA_DIR said it was revoked (docs/operations.md: revoke it again)');
});

t.test('a DATA_DIR/keys that is a link the operator set up: its revocations are kept too', async (t) => {
  const elsewhere = tempDir();
  fs.cpSync(path.join(a.dataDir, 'keys'), path.join(elsewhere, 'keys'), { recursive: true });
  const target = tempDir();
  fs.symlinkSync(path.join(elsewhere, 'keys'), path.join(target, 'keys'));
  const r = await runCli(target, ['restore', file]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.keys.kept_revocations, [leaked]);
  t.ok(fs.lstatSync(path.join(target, 'keys')).isDirectory(), 'the restored keys are a plain folder');
  t.ok(fs.lstatSync(r.json.keys.previous_keys).isSymbolicLink(), 'the link is moved aside as it was, its folder untouched');
});

t.test('a symlink in the backup\'s keys folder: refused before anything moves', async (t) => {
  const before = snapshot(a.dataDir);
  const copy = copyOfBackup('symlinked');
  const current = fs.readFileSync(path.join(`${copy}.keys`, 'current'), 'utf8').trim();
  // a kid-shaped name pointing at a file outside: the finding's /etc/passwd
  fs.rmSync(path.join(`${copy}.keys`, `${current}.json`));
  fs.symlinkSync('/etc/passwd', path.join(`${copy}.keys`, `${current}.json`));
  const r = await runCli(a.dataDir, ['restore', copy]);
  t.equal(r.code, 2, 'a usage error');
  t.match(r.stderr, /is a symbolic link.*nothing was restored/);
  t.same(snapshot(a.dataDir), before, 'DATA_DIR is exactly as it was');
  t.notOk(fs.readdirSync(path.join(a.dataDir, 'keys')).some((n) => fs.readFileSync(path.join(a.dataDir, 'keys', n), 'utf8').includes('root:')), 'no passwd anywhere in keys');

  // the keys folder itself a link
  const linked = copyOfBackup('linked-folder');
  fs.renameSync(`${linked}.keys`, `${linked}.real-keys`);
  fs.symlinkSync(`${linked}.real-keys`, `${linked}.keys`);
  const r2 = await runCli(a.dataDir, ['restore', linked]);
  t.equal(r2.code, 2);
  t.match(r2.stderr, /is a symbolic link/);
  t.same(snapshot(a.dataDir), before);
});

t.test('a folder, a stray file or a bad key in the backup\'s keys folder: refused before anything moves', async (t) => {
  const before = snapshot(a.dataDir);
  const cases: [string, (dir: string) => void, RegExp][] = [
    ['folder', (dir) => fs.mkdirSync(path.join(dir, 'sub')), /sub is a folder/],
    ['stray', (dir) => fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello'), /holds only `current` and <kid>\.json files/],
    ['garbage', (dir) => {
      const kid = fs.readFileSync(path.join(dir, 'current'), 'utf8').trim();
      fs.writeFileSync(path.join(dir, `${kid}.json`), '{"kid":"x"}');
    }, /is not a valid signing key/],
    ['renamed', (dir) => {
      // a valid key file under another kid's name
      const kid = fs.readFileSync(path.join(dir, 'current'), 'utf8').trim();
      fs.copyFileSync(path.join(dir, `${kid}.json`), path.join(dir, `${'A'.repeat(43)}.json`));
    }, /is not a valid signing key: its kid/],
    ['other public key', (dir) => {
      // the public half replaced: the kid is no longer its thumbprint
      const kid = fs.readFileSync(path.join(dir, 'current'), 'utf8').trim();
      const key = JSON.parse(fs.readFileSync(path.join(dir, `${kid}.json`), 'utf8'));
      fs.writeFileSync(path.join(dir, `${kid}.json`), JSON.stringify({ ...key, jwk: { ...key.jwk, x: key.jwk.d } }));
    }, /its kid is not the thumbprint of its public key/],
    ['other private part', (dir) => {
      // the private half of another key under this one's kid: it would sign verdicts nobody can check
      const kid = fs.readFileSync(path.join(dir, 'current'), 'utf8').trim();
      const key = JSON.parse(fs.readFileSync(path.join(dir, `${kid}.json`), 'utf8'));
      const d = Buffer.from(key.jwk.d, 'base64url');
      d[0] = d[0]! ^ 1;
      fs.writeFileSync(path.join(dir, `${kid}.json`), JSON.stringify({ ...key, jwk: { ...key.jwk, d: d.toString('base64url') } }));
    }, /its private part does not match its public key/],
    ['no current', (dir) => fs.rmSync(path.join(dir, 'current')), /no `current` file/],
  ];
  for (const [name, tamper, message] of cases) {
    const copy = copyOfBackup(name.replace(' ', '-'));
    tamper(`${copy}.keys`);
    const r = await runCli(a.dataDir, ['restore', copy]);
    t.equal(r.code, 2, `${name}: refused`);
    t.match(r.stderr, message, name);
    t.same(snapshot(a.dataDir), before, `${name}: DATA_DIR is exactly as it was`);
  }
});

t.test('the swap is all or nothing: a rename that fails puts back the ones done', async (t) => {
  const dir = tempDir();
  for (const n of ['store', 'new-store', 'keys', 'new-keys']) fs.mkdirSync(path.join(dir, n));
  const p = (n: string) => path.join(dir, n);
  const moves = [
    { from: p('store'), to: p('store.before') },
    { from: p('new-store'), to: p('store') },
    { from: p('keys'), to: p('keys.before') },
    { from: p('new-keys'), to: p('keys') },
  ];
  let calls = 0;
  const failing = (from: string, to: string) => {
    // the third rename fails (after the store was swapped, as the finding's folder entry did)
    if (++calls === 3) throw new Error('EIO: injected');
    fs.renameSync(from, to);
  };
  t.throws(() => renameAll(moves, failing), /nothing was changed: EIO: injected/);
  t.same(fs.readdirSync(dir).sort(), ['keys', 'new-keys', 'new-store', 'store'], 'every rename done was undone');
});

t.test('a keys revoke run while a restore copies the store is kept: the restore reads the revocations holding the keys lock', async (t) => {
  // the review's case: an emergency revoke during a restore of a backup from before the leak.
  // The restore read DATA_DIR's revocations first, then copied the store (minutes for a large
  // one), then swapped the folders: the revocation, made in the folder it then moved aside, was
  // lost and the leaked key current again. Here the revoke is run, by a CLI process of its own,
  // at the moment the store has been copied (the test process waits for it there).
  const dir = tempDir('lv-restore-revoke-');
  t.equal((await runCli(dir, ['token', 'create', '--name', 't1', '--grant', 'rgb_liveness:100:day'])).code, 0);
  const leakedHere = (await ensureSigningKey(dir)).kid;
  const backup = path.join(tempDir('lv-restore-revoke-backup-'), 'b.mdb');
  t.equal((await runCli(dir, ['backup', backup])).code, 0);
  // (the restore copies off the event loop, so that the DATA_DIR mark it holds stays refreshed)
  const copy = fs.promises.copyFile;
  let revoke: ReturnType<typeof spawnSync> | undefined;
  fs.promises.copyFile = (async (from: fs.PathLike, to: fs.PathLike, mode?: number) => {
    await copy(from, to, mode);
    if (revoke === undefined && String(to).startsWith(path.join(dir, '.restore-'))) {
      revoke = spawnSync(process.execPath, [...CLI_ARGS, 'keys', 'revoke', leakedHere, '--by', 'incident 42'], { cwd: ROOT, env: { ...process.env, DATA_DIR: dir }, encoding: 'utf8' });
    }
  }) as typeof fs.promises.copyFile;
  let r: Awaited<ReturnType<typeof runCli>>;
  try {
    r = await runCli(dir, ['restore', backup]);
  } finally {
    fs.promises.copyFile = copy;
  }
  t.equal(revoke?.status, 0, `the revoke ran during the restore and answered: ${String(revoke?.stderr)}`);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.keys.kept_revocations, [leakedHere], 'the restore kept the revocation made while it ran');
  const keys = await keysOf(dir);
  const k = keys.find((x) => x.kid === leakedHere)!;
  t.ok(k.revoked_at, 'the leaked key is revoked');
  t.notOk(k.current || k.published, 'neither current nor published');
  t.notOk('d' in JSON.parse(fs.readFileSync(path.join(dir, 'keys', `${leakedHere}.json`), 'utf8')).jwk, 'its private part is not back');
  t.notOk(fs.existsSync(path.join(dir, 'keys.lock')), 'the restore let go of the keys lock');
});

t.test('a restore swaps the keys holding the keys lock: it waits for a key command under way, and keeps what it revoked', async (t) => {
  const dir = tempDir('lv-restore-lock-');
  t.equal((await runCli(dir, ['token', 'create', '--name', 't1', '--grant', 'rgb_liveness:100:day'])).code, 0);
  const old = (await ensureSigningKey(dir)).kid;
  const backup = path.join(tempDir('lv-restore-lock-backup-'), 'b.mdb');
  t.equal((await runCli(dir, ['backup', backup])).code, 0);
  await rotateSigningKey(dir);
  // a key command of another process holds the lock (a live process of the test's own)
  const holder = spawn('sleep', ['300'], { stdio: 'ignore' });
  t.teardown(() => holder.kill());
  await new Promise((r) => holder.once('spawn', r));
  const lock = path.join(dir, 'keys.lock');
  fs.writeFileSync(lock, JSON.stringify({ pid: holder.pid, pid_start: processStartTime(holder.pid!) }));
  let waiting!: () => void;
  const waits = new Promise<void>((r) => (waiting = r));
  setKeysLockHook((event) => {
    if (event === 'waiting') waiting();
  });
  t.teardown(() => setKeysLockHook(null));
  const restoring = runCli(dir, ['restore', backup]);
  const state = settledState(restoring);
  await Promise.race([waits, restoring]);
  t.equal(state.settled, false, 'the restore waits for the key command');
  t.notOk(fs.readdirSync(dir).some((n) => n.includes('before-restore')), 'nothing swapped yet');
  // what that command does meanwhile: it revokes the retired key (the backup's current one)
  const file = path.join(dir, 'keys', `${old}.json`);
  const key = JSON.parse(fs.readFileSync(file, 'utf8')) as KeyFile;
  fs.writeFileSync(file, JSON.stringify({ ...key, revoked_at: new Date().toISOString(), revoked_by: 'incident 43', jwk: publicPart(key.jwk) }));
  fs.rmSync(lock); // and ends
  const r = await restoring;
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.keys.kept_revocations, [old], 'the revocation made while the restore waited is kept');
  t.equal(r.json.keys.current_from, 'data_dir', 'the backup\'s current key was revoked: the live one signs');
  const k = (await keysOf(dir)).find((x) => x.kid === old)!;
  t.ok(k.revoked_at && !k.current && !k.published, 'revoked, neither current nor published');
});
