import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { checkModelSet, createInferenceEngine } from '../../src/inference/index.ts';

const MODELS = join(import.meta.dirname, '../../models');

function variant(t: Test, set: string, edit: (m: any) => void): string {
  const root = mkdtempSync(join(tmpdir(), 'models-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  cpSync(join(MODELS, set), join(root, set), { recursive: true });
  const file = join(root, set, 'manifest.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  edit(m);
  writeFileSync(file, JSON.stringify(m));
  return root;
}

t.test('models check passes the shipped sets and runs every graph', async (t) => {
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) {
    const r = await checkModelSet(join(MODELS, set));
    t.equal(r.ok, true, `${set}: ${r.report}`);
    t.match(r.report, /result: ok/);
    t.match(r.report, /trained is false/);
  }
  const raw = await checkModelSet(join(MODELS, 'raw_v1'));
  t.match(raw.report, /temporal head: logit/);
  t.match(raw.report, /colour branches: difference logit/);
});

t.test('models check names a bad manifest field', async (t) => {
  const root = variant(t, 'bgr80_ensemble_v1', (m) => { m.modules.rgb_liveness.graphs[0].channel_order = 'GBR'; });
  const r = await checkModelSet(join(root, 'bgr80_ensemble_v1'));
  t.equal(r.ok, false);
  t.equal(r.report, 'manifest.json: modules.rgb_liveness.graphs[0].channel_order must be "RGB" or "BGR"');
});

t.test('a manifest that disagrees with the graph fails at load with both shapes', async (t) => {
  const root = variant(t, 'raw_v1', (m) => { m.modules.rgb_liveness.graphs[0].size = 80; });
  const r = await checkModelSet(join(root, 'raw_v1'));
  t.equal(r.ok, false);
  t.match(r.report, 'rgb_liveness: FAILED: modules.rgb_liveness.graphs[0]: rgb_frame.onnx input "image" is [batch, 3, 128, 128] but the manifest makes it [N, 3, 80, 80]');
  t.match(r.report, /color_liveness: 2 graph/, 'the other module is still checked');

  const fixed = variant(t, 'bgr80_ensemble_v1', (m) => { m.modules.rgb_liveness.graphs[1].layout = 'NHWC'; });
  const r2 = await checkModelSet(join(fixed, 'bgr80_ensemble_v1'));
  t.match(r2.report, 'bgr80_b.onnx input "input" is [1, 3, 80, 80] but the manifest makes it [1, 80, 80, 3]');

  // The engine refuses it the same way: start rejects and readiness carries the reason.
  const engine = createInferenceEngine({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1, enabledModules: ['rgb_liveness'] });
  t.teardown(() => engine.close());
  await t.rejects(engine.start(), /manifest makes it \[N, 3, 80, 80\]/);
  t.match(engine.readiness()[0], { ready: false, error: /rgb_frame\.onnx input "image"/ });
});
