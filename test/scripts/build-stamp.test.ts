import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { BUILD_OUTPUTS } from '../../scripts/build-stamp.mjs';
import { ROOT, tempDir } from '../helpers/server.ts';

// `npm start` rebuilds only when a build input changed (scripts/build-stamp.mjs): checked on
// a small tree of its own, so no real build runs here.
const root = tempDir('stamp-');
const run = (verb: string) => spawnSync(process.execPath, [join(ROOT, 'scripts/build-stamp.mjs'), verb], { env: { ...process.env, BUILD_ROOT: root }, encoding: 'utf8' });
mkdirSync(join(root, 'src/http'), { recursive: true });
mkdirSync(join(root, 'dist/src/cli'), { recursive: true });
writeFileSync(join(root, 'src/http/a.ts'), 'export const a = 1;\n');
writeFileSync(join(root, 'tsconfig.json'), '{}\n');
for (const output of BUILD_OUTPUTS) writeFileSync(join(root, output), '');

t.test('a build records its inputs; only a changed input makes dist stale', async (t) => {
  t.equal(run('check').status, 1, 'never built: stale');
  t.equal(run('write').status, 0);
  t.equal(run('check').status, 0, 'just built: up to date');
  t.equal(run('start').status, 0, 'start with nothing changed builds nothing');
  const later = new Date(Date.now() + 60_000);
  utimesSync(join(root, 'src/http/a.ts'), later, later);
  t.equal(run('check').status, 0, 'a touched file with the same bytes is no change');
  writeFileSync(join(root, 'src/http/a.ts'), 'export const a = 2;\n');
  t.equal(run('check').status, 1, 'an edited source makes it stale');
  writeFileSync(join(root, 'src/http/a.ts'), 'export const a = 1;\n');
  t.equal(run('check').status, 0, 'and the same bytes again do not');
  writeFileSync(join(root, 'src/http/b.ts'), '');
  t.equal(run('check').status, 1, 'a new source file makes it stale');
  rmSync(join(root, 'src/http/b.ts'));
  writeFileSync(join(root, 'tsconfig.json'), '{"x":1}\n');
  t.equal(run('check').status, 1, 'so does a changed tsconfig');
  writeFileSync(join(root, 'tsconfig.json'), '{}\n');
  rmSync(join(root, 'dist/src/worker.bundle.mjs'));
  t.equal(run('check').status, 1, 'a missing build output is stale whatever the stamp says');
  writeFileSync(join(root, 'dist/src/worker.bundle.mjs'), '');
});

t.test('the inputs are those a build began with: a source edited during the build leaves dist stale', async (t) => {
  t.equal(run('begin').status, 0);
  t.equal(run('check').status, 1, 'a build under way: no stamp, stale');
  writeFileSync(join(root, 'src/http/a.ts'), 'export const a = 3;\n'); // edited while tsc ran
  t.equal(run('write').status, 0);
  t.equal(run('check').status, 1, 'the edit was maybe not built: stale');
  t.equal(run('begin').status, 0);
  t.equal(run('write').status, 0);
  t.equal(run('check').status, 0, 'a build begun after the edit: up to date');
});
