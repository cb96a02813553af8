import { join } from 'node:path';
import t from 'tap';
import { createInferenceEngine } from '../../src/inference/index.ts';
import { capture, clonePixels } from './helpers.ts';
import { bgr80Single, rawColor, rawSequence, rawSingle } from './reference.ts';

const MODELS = join(import.meta.dirname, '../../models');
const TOL = 1e-5;

t.test('raw_v1 on the WASM pool matches onnxruntime-node in every mode', async (t) => {
  const engine = createInferenceEngine({ modelsDir: MODELS, modelSet: 'raw_v1', backend: 'wasm', threads: 2, warmupRuns: 2 });
  t.teardown(() => engine.close());
  await engine.start();
  t.equal(engine.executionProvider, 'wasm');

  const single = capture('s', 'rgb_single', [{ seed: 3 }]);
  // 8 frames with a dropped one: the final window is the 4 frames after it.
  const seq = capture('q', 'rgb_sequence', [{}, {}, {}, { status: 'dropped' }, { seed: 11 }, { seed: 12 }, { seed: 13 }, { seed: 14 }]);
  const singlePx = clonePixels(single);
  const seqPx = clonePixels(seq);
  const [s, q] = await engine.infer({ module_id: 'rgb_liveness', captures: [single, seq] });

  const refSingle = await rawSingle(singlePx[0]!);
  t.ok(Math.abs(s.score! - refSingle) < TOL, `single ${s.score} vs ${refSingle}`);
  t.equal(s.single_score, s.score);

  t.same(q.window_frame_indices, [4, 5, 6, 7]);
  const refSeq = await rawSequence(seqPx.slice(4) as Uint8Array[]);
  t.ok(Math.abs(q.score! - refSeq.score) < TOL, `sequence ${q.score} vs ${refSeq.score}`);
  t.ok(Math.abs(q.temporal_logit! - refSeq.temporal_logit) < 1e-4, 'temporal_logit');

  const col = capture('c', 'color', [{ seed: 21 }, { seed: 22 }, { seed: 23 }, { seed: 24 }]);
  const colPx = clonePixels(col);
  const [c] = await engine.infer({ module_id: 'color_liveness', captures: [col] });
  const refCol = await rawColor(colPx as Uint8Array[]);
  t.ok(Math.abs(c.score! - refCol.score) < TOL, `colour ${c.score} vs ${refCol.score}`);
  for (const k of ['difference', 'appearance', 'fused'] as const) {
    t.ok(Math.abs(c.color_logits![k] - refCol[k]) < 1e-4, `color_logits.${k}`);
  }
});

t.test('bgr80_ensemble_v1 deploys by manifest only and serves the onnxruntime score', async (t) => {
  const engine = createInferenceEngine({
    modelsDir: MODELS, modelSet: 'bgr80_ensemble_v1', backend: 'wasm', threads: 1, warmupRuns: 2, enabledModules: ['rgb_liveness'],
  });
  t.teardown(() => engine.close());
  await engine.start();
  const caps = [1, 2, 3].map((i) => capture(`b${i}`, 'rgb_single', [{ seed: 40 + i }]));
  const px = caps.map((c) => clonePixels(c)[0]!);
  const results = await engine.infer({ module_id: 'rgb_liveness', captures: caps });
  for (const [i, r] of results.entries()) {
    const ref = await bgr80Single(px[i]);
    t.ok(Math.abs(r.score! - ref) < TOL, `${r.capture_id}: ${r.score} vs ${ref}`);
    t.equal(r.model_set, 'bgr80_ensemble_v1');
    t.equal(r.decision_policy, 'single_frame_v1');
  }
  // window_mean_v1: the sequence score is the mean frame score over the final window.
  const seq = capture('bs', 'rgb_sequence', [{ seed: 51 }, { seed: 52 }, { seed: 53 }]);
  const seqPx = clonePixels(seq) as Uint8Array[];
  const [q] = await engine.infer({ module_id: 'rgb_liveness', captures: [seq] });
  const refs = await Promise.all(seqPx.map(bgr80Single));
  t.equal(q.decision_policy, 'window_mean_v1');
  t.same(q.window_frame_indices, [0, 1, 2]);
  t.ok(Math.abs(q.score! - (refs[0] + refs[1] + refs[2]) / 3) < TOL, 'window mean');
});

t.test('the native backend serves the same scores', async (t) => {
  const engine = createInferenceEngine({ modelsDir: MODELS, modelSet: 'raw_v1', backend: 'native', threads: 1, warmupRuns: 1 });
  t.teardown(() => engine.close());
  await engine.start();
  t.equal(engine.executionProvider, 'native');
  t.equal(engine.readiness()[0].execution_provider, 'native');
  const single = capture('n', 'rgb_single', [{ seed: 61 }]);
  const px = clonePixels(single)[0]!;
  const [r] = await engine.infer({ module_id: 'rgb_liveness', captures: [single] });
  const ref = await rawSingle(px);
  t.ok(Math.abs(r.score! - ref) < TOL, `${r.score} vs ${ref}`);
});
