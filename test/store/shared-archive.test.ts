import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, runCli, tempDir } from '../helpers/server.ts';

// The demo archive with several nodes, as docs/several-nodes.md says to run it: one shared directory
// mounted as DATA_DIR/archive on every node (here a symbolic link). Demo uploads on either
// node land in it, and nodes pruning it at once remove each day once, without an error.

const DAY = 86_400_000;
const T0 = Date.parse('2026-03-02T12:00:00.000Z');
const pg = await startPostgres();
t.teardown(() => pg.stop());
const dir = tempDir();
const shared = path.join(dir, 'shared-archive');
fs.mkdirSync(shared);
const clock = path.join(dir, 'clock');
fs.writeFileSync(clock, new Date(T0).toISOString());
const dataDirs = ['a', 'b'].map((n) => {
  const d = path.join(dir, n);
  fs.mkdirSync(d);
  fs.symlinkSync(shared, path.join(d, 'archive'));
  return d;
});
const env = { DATABASE_URL: pg.url, WORKERS: '1', CLOCK_FILE: clock };

t.test('two nodes share one archive directory; concurrent pruning removes each day once', async (t) => {
  // both nodes the service's API in process, each on its own DATA_DIR (test/helpers/api.ts:
  // the real app, engine, demo archive and store; issue 43: two started servers before), one
  // after the other (each sets the process's environment while it starts)
  const a = await startApi({ dataDir: dataDirs[0]!, engine: 'real', env, ready: true });
  t.teardown(() => a.stop());
  const b = await startApi({ dataDir: dataDirs[1]!, engine: 'real', env, ready: true });
  t.teardown(() => b.stop());
  const { token } = await makeToken(a, ['rgb_liveness:100:never'], ['--demo']);
  const ids: string[] = [];
  for (const [s, id] of [[a, 'arch-a'], [b, 'arch-b']] as const) {
    const r = await postVerify(s.baseUrl, token, 'rgb_liveness', request([single({ id })]));
    t.equal(r.status, 200, r.text);
    ids.push(r.json.request_id);
  }
  const day = new Date(T0).toISOString().slice(0, 10);
  t.same(fs.readdirSync(shared), [day], 'one day folder in the shared directory');
  t.same(fs.readdirSync(path.join(shared, day)).sort(), [...ids].sort(), 'both nodes archived there');

  fs.writeFileSync(clock, new Date(T0 + 31 * DAY).toISOString());
  const runs = await Promise.all([...dataDirs, ...dataDirs].map((dataDir) => runCli(dataDir, ['retention', 'prune'], '', env)));
  for (const r of runs) t.equal(r.code, 0, r.stderr);
  t.equal(runs.reduce((n, r) => n + r.json.archive, 0), 2, 'the two archived requests were removed once, by one of four pruners');
  t.same(fs.readdirSync(shared), [], 'the shared archive is empty');
});
