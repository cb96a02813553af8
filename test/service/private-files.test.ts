import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken, startServer, tempDir } from '../helpers/server.ts';

// Security issue 29: under `npm start` from a shell with the usual umask 022, the LMDB store,
// the demo images and the rest of DATA_DIR were readable by every account on the host. The
// real server (and the CLI beside it) is started here with umask 022, as such a shell would,
// in a DATA_DIR made beforehand with mode 0755 (`mkdir data`); after a demo verify call, a
// key rotation and a backup, every folder under DATA_DIR must be 0700 and every file 0600.

// the child processes (server and CLI) inherit the umask of this test process
process.umask(0o022);
const dataDir = path.join(tempDir(), 'data');
fs.mkdirSync(dataDir, { mode: 0o755 });
t.equal(fs.statSync(dataDir).mode & 0o777, 0o755, 'precondition: the operator\'s DATA_DIR is world-readable');

/** Every entry under `dir` (itself included) with its permission bits. */
function modes(dir: string): { path: string; dir: boolean; mode: number }[] {
  const out = [{ path: dir, dir: true, mode: fs.statSync(dir).mode & 0o777 }];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(e.parentPath, e.name);
    out.push({ path: p, dir: e.isDirectory(), mode: fs.lstatSync(p).mode & 0o777 });
  }
  return out;
}

t.test('DATA_DIR is 0700 and every file in it 0600, whatever the umask', async (t) => {
  const server = await startServer({ dataDir, ready: true });
  t.teardown(() => server.stop());
  // a demo token: its uploads are archived under DATA_DIR/archive
  const { token } = await makeToken(server, ['rgb_liveness:100:day'], ['--demo']);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'private-1' })]), { 'idempotency-key': 'private-1' });
  t.equal(r.status, 200, r.text);
  const rotated = await server.cli(['keys', 'rotate']);
  t.equal(rotated.code, 0, rotated.stderr);
  const backup = await server.cli(['backup', path.join(dataDir, 'backup.mdb')]);
  t.equal(backup.code, 0, backup.stderr);

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
});
