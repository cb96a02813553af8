import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';
import { brightnessGraph } from './test-graphs.ts';
import { importWriteError } from '../../src/cli/models.ts';
import { UsageError } from '../../src/cli/errors.ts';

// Issue 40 finding 10: `models import --force` deleted any folder of that name in MODELS_DIR,
// models/builder (the shipped sets' builder) included.

t.test('models import --force replaces model sets only: never models/builder or a folder without a manifest', async (t) => {
  const dir = tempDir('force-');
  const models = join(dir, 'models');
  mkdirSync(join(models, 'builder'), { recursive: true });
  writeFileSync(join(models, 'builder', 'build.ts'), '// the shipped sets\' builder\n');
  mkdirSync(join(models, 'notes'));
  writeFileSync(join(models, 'notes', 'keep.txt'), 'an operator\'s file\n');
  const graph = join(dir, 'g.onnx');
  writeFileSync(graph, brightnessGraph('logit', 32, 8, 0.5));
  const env = { MODELS_DIR: models };
  const flags = ['--crop-fraction', '1', '--resize', 'area', '--channel-order', 'RGB', '--scale', '1', '--mean', '0,0,0', '--std', '1,1,1', '--output-kind', 'logit', '--force'];
  const builder = await runCli(join(dir, 'data'), ['models', 'import', graph, '--name', 'builder', ...flags], '', env);
  t.equal(builder.code, 2, builder.stderr);
  t.match(builder.stderr, /model set name "builder" is reserved/);
  t.ok(existsSync(join(models, 'builder', 'build.ts')), 'models/builder untouched');
  const notes = await runCli(join(dir, 'data'), ['models', 'import', graph, '--name', 'notes', ...flags], '', env);
  t.equal(notes.code, 4, notes.stderr);
  t.match(notes.stderr, /notes is not a model set \(no manifest\.json in a folder of its own\): --force replaces model sets only/);
  t.ok(existsSync(join(models, 'notes', 'keep.txt')), 'the folder without a manifest untouched');
  // a model set is replaced
  t.equal((await runCli(join(dir, 'data'), ['models', 'import', graph, '--name', 'mine_v1', ...flags], '', env)).code, 0);
  const again = await runCli(join(dir, 'data'), ['models', 'import', graph, '--name', 'mine_v1', '--threshold', '0.7', ...flags], '', env);
  t.equal(again.code, 0, again.stderr);
  t.match(again.json.manifest.modules.rgb_liveness.modes.rgb_single, { threshold: 0.7 }, 'replaced');
});

t.test('a graph whose fixed size the service cannot feed is refused before --force removes anything', async (t) => {
  const dir = tempDir('force-size-');
  const models = join(dir, 'models');
  const env = { MODELS_DIR: models };
  const flags = ['--crop-fraction', '1', '--resize', 'area', '--channel-order', 'RGB', '--scale', '1', '--mean', '0,0,0', '--std', '1,1,1', '--output-kind', 'logit', '--force'];
  const good = join(dir, 'good.onnx');
  writeFileSync(good, brightnessGraph('logit', 32, 8, 0.5));
  t.equal((await runCli(join(dir, 'data'), ['models', 'import', good, '--name', 'kiosk_v1', ...flags], '', env)).code, 0);
  const big = join(dir, 'big.onnx');
  writeFileSync(big, brightnessGraph('logit', 384, 8, 0.5));
  const r = await runCli(join(dir, 'data'), ['models', 'import', big, '--name', 'kiosk_v1', ...flags], '', env);
  t.equal(r.code, 2, r.stderr);
  t.match(r.stderr, /the graph's input is 384 px square; the service feeds graphs 8 to 320 px/);
  t.ok(existsSync(join(models, 'kiosk_v1', 'manifest.json')), 'the working set is still there (it was deleted, then the new one failed its check)');
  t.equal((await runCli(join(dir, 'data'), ['models', 'check', join(models, 'kiosk_v1')], '', env)).code, 0, 'and still passes its check');
});


t.test('a MODELS_DIR this user cannot write is a usage error saying what to do, not a stack trace', async (t) => {
  // the mapping (this test runs as root, for whom permissions refuse nothing)
  const denied = Object.assign(new Error("EACCES: permission denied, mkdir '/opt/liveness/models/kiosk_v3'"), { code: 'EACCES' });
  const e = importWriteError(denied, '/opt/liveness/models');
  t.ok(e instanceof UsageError, 'exit 2');
  t.match((e as Error).message, /^cannot write the model set into \/opt\/liveness\/models \(EACCES\): run the import as a user who can, or set MODELS_DIR/);
  const other = Object.assign(new Error('disk on fire'), { code: 'EIO' });
  t.equal(importWriteError(other, '/m'), other, 'anything else passes as it is');
});
