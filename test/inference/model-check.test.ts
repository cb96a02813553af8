import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { checkModelSet, createInferenceEngine } from '../../src/inference/index.ts';
import { outputProblem } from '../../src/inference/graph-check.ts';
import { brightnessSet } from './test-graphs.ts';
import { waitFor } from '../helpers/wait.ts';
// its engines run their threads from the build when it matches the sources (issue 43)
import '../helpers/from-build.ts';

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

t.test('a live_index outside the output fails the check and keeps the module unready', async (t) => {
  const root = variant(t, 'bgr80_ensemble_v1', (m) => { m.modules.rgb_liveness.graphs[1].live_index = 3; });
  const r = await checkModelSet(join(root, 'bgr80_ensemble_v1'));
  t.equal(r.ok, false);
  t.match(r.report, 'rgb_liveness: FAILED: modules.rgb_liveness.graphs[1]: bgr80_b.onnx live_index 3 is out of range: output "probs" has 3 classes (0 to 2)');
  t.notMatch(r.report, /NaN/);
  t.match(r.report, /result: FAILED$/);

  const engine = createInferenceEngine({ modelsDir: root, modelSet: 'bgr80_ensemble_v1', backend: 'wasm', threads: 1, warmupRuns: 1, enabledModules: ['rgb_liveness'] });
  t.teardown(() => engine.close());
  await t.rejects(engine.start(), /live_index 3 is out of range/);
  t.match(engine.readiness()[0], { ready: false, error: /graphs\[1\]: bgr80_b\.onnx live_index 3 is out of range/ });
});

t.test('logits declared as softmax, and a logit graph read as softmax, are caught', async (t) => {
  const logits = brightnessSet(t, { head: 'logits', kind: 'softmax', live_index: 1 });
  const r = await checkModelSet(logits.dir);
  t.equal(r.ok, false);
  t.match(r.report, /graphs\[0\]: bright\.onnx output "score" gave -?[\d.]+, outside \[0, 1\], but output_kind is "softmax" \(is it "logits"\?\)|sums to [\d.]+ over its 3 classes, not 1/);

  // declared right, the same graph passes
  const fine = brightnessSet(t, { head: 'logits', kind: 'logits', live_index: 1 });
  const ok = await checkModelSet(fine.dir);
  t.equal(ok.ok, true, ok.report);
  const soft = brightnessSet(t, { head: 'softmax', kind: 'softmax', live_index: 1 });
  t.equal((await checkModelSet(soft.dir)).ok, true);

  // a one-value logit graph declared with classes: no second class to read
  const one = brightnessSet(t, { head: 'logit', kind: 'logits', live_index: 0 });
  t.match((await checkModelSet(one.dir)).report, /output "score" has 1 value per item; output_kind "logits" needs at least two classes/);
  // and a three-class graph declared as one logit would be misread silently
  const wide = brightnessSet(t, { head: 'softmax', kind: 'logit' });
  t.match((await checkModelSet(wide.dir)).report, /output "score" has 3 values per item but output_kind "logit" means exactly one/);
});

t.test('a graph that gives NaN fails the check; the other module still serves', async (t) => {
  const nan = brightnessSet(t, { head: 'nan', kind: 'logit' });
  const r = await checkModelSet(nan.dir);
  t.equal(r.ok, false);
  t.match(r.report, 'graphs[0]: bright.onnx output "score" gave NaN on the check inputs (every value must be finite)');

  // A raw_v1 copy whose colour module is broken: rgb_liveness loads and is ready, colour
  // is unready with the reason.
  const root = variant(t, 'raw_v1', (m) => { m.modules.color_liveness.graphs[0].output_kind = 'softmax'; m.modules.color_liveness.graphs[0].live_index = 0; });
  const engine = createInferenceEngine({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 });
  t.teardown(() => engine.close());
  await t.rejects(engine.start(), /color_difference\.onnx output "logit" has 1 value per item/);
  await waitFor(() => engine.readiness()[0]!.ready, { timeoutMs: 60_000, intervalMs: 20, what: 'rgb_liveness to be ready' });
  const [rgb, colour] = engine.readiness();
  t.match(rgb, { module_id: 'rgb_liveness', ready: true, error: null });
  t.match(colour, { module_id: 'color_liveness', ready: false, error: /modules\.color_liveness\.graphs\[0\]: color_difference\.onnx output "logit" has 1 value per item/ });
});

t.test('outputProblem reads widths, sums and ranges', async (t) => {
  const sm = { output: 'p', output_kind: 'softmax' as const, live_index: 1 };
  t.equal(outputProblem(sm, [0.2, 0.7, 0.1, 0.3, 0.3, 0.4], 2), null);
  t.match(outputProblem(sm, [0.2, 0.7, 0.1, 0.3, 0.3, 0.3999], 2), null, 'within 1e-3');
  t.match(outputProblem(sm, [0.2, 0.7, 0.1, 0.3, 0.3, 0.398], 2), /sums to 0\.99[0-9]* over its 3 classes/);
  t.match(outputProblem(sm, [0.2, 0.7, 0.1, 0.3, 0.3, Infinity], 2), /gave Infinity/);
  t.match(outputProblem({ ...sm, live_index: 3 }, [0.2, 0.7, 0.1], 1), /live_index 3 is out of range/);
  t.match(outputProblem({ output: 'p', output_kind: 'probability' }, [1.5], 1), /outside \[0, 1\]/);
  t.equal(outputProblem({ output: 'p', output_kind: 'logit' }, [-40, 40], 2), null);
  t.match(outputProblem({ output: 'p', output_kind: 'logit' }, [1, 2, 3], 2), /3 values for a batch of 2/);
  // probabilities declared as logits: squashed towards 1/k when served (0.95 of two served as 0.56)
  const lg = { output: 'p', output_kind: 'logits' as const, live_index: 1 };
  t.match(outputProblem(lg, [0.05, 0.95, 0.4, 0.6], 2), /gives rows of probabilities .* but output_kind is "logits" \(is it "softmax"\?\)/);
  t.equal(outputProblem(lg, [0.05, 0.95, -1.2, 3.4], 2), null, 'one row that is no distribution: logits');
  t.equal(outputProblem(lg, [0.2, 0.3, 0.1, 0.6], 2), null, 'rows in [0, 1] that do not sum to 1: logits');
});

t.test('a softmax graph declared as "logits" fails its check, naming the fix', async (t) => {
  const root = variant(t, 'bgr80_ensemble_v1', (m) => { m.modules.rgb_liveness.graphs[0].output_kind = 'logits'; });
  const r = await checkModelSet(join(root, 'bgr80_ensemble_v1'));
  t.equal(r.ok, false, 'it passed as ok, and served scores squashed towards 1/3');
  t.match(r.report, /rgb_liveness: FAILED: modules\.rgb_liveness\.graphs\[0\]: .*output "probs" gives rows of probabilities/);
});

t.test('the temporal head is checked on the features the frame graphs really give', async (t) => {
  // two frame graphs with features: the service concatenates them (32 wide), which the
  // 16-wide temporal head cannot take; the check must see what serving would send
  const root = variant(t, 'raw_v1', (m) => { m.modules.rgb_liveness.graphs.splice(1, 0, { ...m.modules.rgb_liveness.graphs[0] }); });
  const r = await checkModelSet(join(root, 'raw_v1'));
  t.equal(r.ok, false);
  t.match(r.report, /rgb_liveness: FAILED: modules\.rgb_liveness\.graphs\[2\]: temporal_head\.onnx failed on the check inputs/);
});
