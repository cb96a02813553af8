import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadManifest } from '../../src/inference/index.ts';

const RAW = join(import.meta.dirname, '../../models/raw_v1');
const BGR = join(import.meta.dirname, '../../models/bgr80_ensemble_v1');

// A copy of a shipped set with its manifest edited by `edit`.
function variant(t: Test, src: string, edit: (m: any) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'manifest-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(src, dir, { recursive: true });
  const m = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  edit(m);
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(m));
  return dir;
}

t.test('the shipped manifests load', async (t) => {
  const raw = loadManifest(RAW);
  t.equal(raw.model_set, 'raw_v1');
  t.equal(raw.modules.rgb_liveness?.modes.rgb_single?.decision_policy, 'single_frame_v1');
  const bgr = loadManifest(BGR);
  t.equal(bgr.modules.rgb_liveness?.graphs.length, 2);
  t.equal(bgr.modules.color_liveness, undefined);
});

const cases: [string, string, (m: any) => void, string][] = [
  ['bad layout', RAW, (m) => { m.modules.rgb_liveness.graphs[0].layout = 'NCWH'; },
    'manifest.json: modules.rgb_liveness.graphs[0].layout must be "NCHW" or "NHWC"'],
  ['missing threshold', RAW, (m) => { delete m.modules.rgb_liveness.modes.rgb_single.threshold; },
    'manifest.json: modules.rgb_liveness.modes.rgb_single.threshold is required'],
  ['threshold out of range', RAW, (m) => { m.modules.color_liveness.modes.color.threshold = 1.5; },
    'manifest.json: modules.color_liveness.modes.color.threshold must be a number >= 0 and <= 1'],
  ['unknown field', RAW, (m) => { m.modules.rgb_liveness.graphs[1].colour = 'x'; },
    'manifest.json: modules.rgb_liveness.graphs[1].colour is not an allowed field'],
  ['unknown policy', RAW, (m) => { m.modules.rgb_liveness.modes.rgb_sequence.decision_policy = 'magic'; },
    'manifest.json: modules.rgb_liveness.modes.rgb_sequence.decision_policy must be "temporal_head_v1" or "window_mean_v1"'],
  ['wrong format', RAW, (m) => { m.format = 'other'; },
    'manifest.json: format must be "liveness-model-set/1"'],
  ['std of two values', RAW, (m) => { m.modules.rgb_liveness.graphs[0].std = [1, 1]; },
    'manifest.json: modules.rgb_liveness.graphs[0].std must be an array of 3 items'],
  ['batch 2', BGR, (m) => { m.modules.rgb_liveness.graphs[1].batch = 2; },
    'manifest.json: modules.rgb_liveness.graphs[1].batch must be "dynamic" or 1'],
  ['softmax without live class', BGR, (m) => { delete m.modules.rgb_liveness.graphs[0].live_index; },
    'manifest.json: modules.rgb_liveness.graphs[0].live_index is required when output_kind is "softmax"'],
  ['missing file', BGR, (m) => { m.modules.rgb_liveness.graphs[1].file = 'nope.onnx'; },
    'manifest.json: modules.rgb_liveness.graphs[1].file "nope.onnx" does not exist in'],
  ['file outside the set', BGR, (m) => { m.modules.rgb_liveness.graphs[1].file = '../raw_v1/rgb_frame.onnx'; },
    'manifest.json: modules.rgb_liveness.graphs[1].file must stay inside the model-set folder'],
  ['role in the wrong module', RAW, (m) => { m.modules.color_liveness.graphs[0].role = 'frame'; },
    'manifest.json: modules.color_liveness.graphs[0].role must be "color_difference" or "color_appearance" in color_liveness'],
  ['temporal policy without its graph', BGR, (m) => { m.modules.rgb_liveness.modes.rgb_sequence.decision_policy = 'temporal_head_v1'; },
    'manifest.json: modules.rgb_liveness.graphs must hold exactly one graph with role "temporal"'],
  ['uint8 differences', RAW, (m) => { m.modules.color_liveness.graphs[0].dtype = 'uint8'; },
    'manifest.json: modules.color_liveness.graphs[0].dtype must be "float32" for role "color_difference"'],
  ['min_final_frames above the window', RAW, (m) => { m.modules.rgb_liveness.modes.rgb_sequence.min_final_frames = 21; },
    'manifest.json: modules.rgb_liveness.modes.rgb_sequence.min_final_frames must be an integer >= 1 and <= 20'],
];

for (const [name, src, edit, message] of cases) {
  t.test(`a wrong manifest names the field: ${name}`, async (t) => {
    const dir = variant(t, src, edit);
    t.throws(() => loadManifest(dir), { message: new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) });
  });
}

t.test('an unreadable manifest says so', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'manifest-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'manifest.json'), '{not json');
  t.throws(() => loadManifest(dir), { message: /^manifest\.json: cannot be read/ });
});

t.test('model_set is the name of its folder: a copy that kept the old name is refused, naming both', async (t) => {
  // a copy of raw_v1 as raw_copy, its threshold changed, its name left: it served every
  // verdict as "raw_v1" with raw_copy's threshold, and the two could not be told apart
  const dir = variant(t, RAW, (m) => { m.modules.rgb_liveness.modes.rgb_single.threshold = 0.1; });
  const copy = join(dir, '..', `raw_copy_${process.pid}`);
  cpSync(dir, copy, { recursive: true });
  t.teardown(() => rmSync(copy, { recursive: true, force: true }));
  t.throws(() => loadManifest(copy), { message: `manifest.json: model_set is "raw_v1" but the set's folder is "raw_copy_${process.pid}": they must be the same (the name is echoed in every result)` });
  const m = JSON.parse(readFileSync(join(copy, 'manifest.json'), 'utf8'));
  writeFileSync(join(copy, 'manifest.json'), JSON.stringify({ ...m, model_set: `raw_copy_${process.pid}` }));
  t.equal(loadManifest(copy).model_set, `raw_copy_${process.pid}`, 'renamed, it loads');
});
