import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createInferenceEngine, type InferenceEngine, type ResultRecord } from '../../src/inference/index.ts';
import { capture } from './helpers.ts';

const MODELS = join(import.meta.dirname, '../../models');
const KEYS = [
  'capture_id', 'mode', 'status', 'alive', 'score', 'reason', 'final_window_frames', 'window_frame_indices',
  'reset_events', 'single_score', 'temporal_logit', 'color_logits', 'model_set', 'decision_policy', 'threshold',
  'min_final_frames',
].sort();

function checkShape(t: Test, r: ResultRecord): void {
  t.same(Object.keys(r).sort(), KEYS, `${r.capture_id}: every key present`);
  if (r.status === 'retry') {
    t.equal(r.alive, null);
    t.equal(r.score, null);
    t.type(r.reason, 'string');
  } else {
    t.equal(r.reason, null);
    t.ok(r.score! >= 0 && r.score! <= 1, 'score is a probability');
    t.equal(r.alive, r.score! > r.threshold, 'alive exactly when score > threshold');
  }
  if (r.mode !== 'rgb_sequence') {
    t.equal(r.min_final_frames, null);
    t.equal(r.temporal_logit, null);
    t.equal(r.final_window_frames, 0);
  }
  if (r.mode !== 'rgb_single') t.equal(r.single_score, null);
  if (r.mode !== 'color') t.equal(r.color_logits, null);
}

// A raw_v1 copy with deployment settings changed in its manifest.
function rawVariant(t: Test, edit: (m: any) => void): string {
  const root = mkdtempSync(join(tmpdir(), 'models-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  cpSync(join(MODELS, 'raw_v1'), join(root, 'raw_v1'), { recursive: true });
  const file = join(root, 'raw_v1', 'manifest.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  edit(m);
  writeFileSync(file, JSON.stringify(m));
  return root;
}

// One engine for the shipped set, shared by the tests below (start-up dominates their cost).
const shipped = createInferenceEngine({ modelsDir: MODELS, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 });
t.teardown(() => shipped.close());
const shippedReady = shipped.start();

async function engineFor(t: Test, modelsDir?: string): Promise<InferenceEngine> {
  if (!modelsDir) {
    await shippedReady;
    return shipped;
  }
  const e = createInferenceEngine({ modelsDir, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 });
  t.teardown(() => e.close());
  await e.start();
  return e;
}

t.test('single, sequence and retries with the shipped raw_v1', async (t) => {
  const e = await engineFor(t);
  const caps = [
    capture('single', 'rgb_single', [{}]),
    capture('single-incomplete', 'rgb_single', [{}], false),
    capture('single-failed', 'rgb_single', [{ status: 'face_unavailable' }]),
    capture('single-empty', 'rgb_single', []),
    capture('seq', 'rgb_sequence', [{}, {}, {}]),
    capture('seq-incomplete', 'rgb_sequence', [{}, {}], false),
    capture('seq-terminal', 'rgb_sequence', [{}, {}, { status: 'dropped' }]),
    capture('seq-all-failed', 'rgb_sequence', [{ status: 'dropped' }, { status: 'face_unavailable' }]),
  ];
  const r = await e.infer({ module_id: 'rgb_liveness', captures: caps });
  t.same(r.map((x) => x.capture_id), caps.map((c) => c.packet.capture_id), 'results keep input order');
  for (const x of r) checkShape(t, x);
  const by = Object.fromEntries(r.map((x) => [x.capture_id, x]));

  t.equal(by.single.status, 'ok');
  t.equal(by.single.decision_policy, 'single_frame_v1');
  t.equal(by.single.model_set, 'raw_v1');
  t.equal(by.single.single_score, by.single.score);
  t.same(by.single.window_frame_indices, []);

  t.equal(by['single-incomplete'].reason, 'incomplete_capture');
  t.equal(by['single-failed'].reason, 'no_usable_frames');
  t.equal(by['single-empty'].reason, 'no_usable_frames');

  t.equal(by.seq.status, 'ok');
  t.equal(by.seq.decision_policy, 'temporal_head_v1');
  t.equal(by.seq.min_final_frames, 1);
  t.equal(by.seq.final_window_frames, 3);
  t.same(by.seq.window_frame_indices, [0, 1, 2]);
  t.type(by.seq.temporal_logit, 'number');
  t.ok(Math.abs(by.seq.score! - 1 / (1 + Math.exp(-by.seq.temporal_logit!))) < 1e-9, 'score = sigmoid(temporal_logit)');

  t.equal(by['seq-incomplete'].reason, 'incomplete_capture');
  t.equal(by['seq-incomplete'].min_final_frames, 1, 'min_final_frames present on a sequence retry');
  t.equal(by['seq-terminal'].reason, 'terminal_frame_unavailable');
  t.same(by['seq-terminal'].reset_events, [{ source_index: 2, reason: 'dropped' }]);
  t.equal(by['seq-all-failed'].reason, 'no_usable_frames');
});

t.test('the CNN never sees frames that cannot reach the final window', async (t) => {
  const e = await engineFor(t);
  // A gap after the 10th of 25 frames cuts those 10 off; in a clean 25-frame run the
  // 20-frame cap cuts off the first 5.
  const gapped = capture('gap', 'rgb_sequence', Array.from({ length: 25 }, (_, i) => ({ index: i < 10 ? i : i + 1 })));
  const clean = capture('clean', 'rgb_sequence', Array.from({ length: 25 }, () => ({})));
  // Frames that cannot reach the window get 1-byte "crops": preprocessing refuses anything
  // but 307200 bytes, so the call would fail if the CNN were given one of them.
  for (let i = 0; i < 10; i++) gapped.pixels[i] = new Uint8Array(1);
  for (let i = 0; i < 5; i++) clean.pixels[i] = new Uint8Array(1);
  const [g, c] = await e.infer({ module_id: 'rgb_liveness', captures: [gapped, clean] });
  t.same(g.reset_events, [{ source_index: 11, reason: 'missing_index' }]);
  t.same(g.window_frame_indices, Array.from({ length: 15 }, (_, i) => i + 11));
  t.equal(g.status, 'ok');
  t.equal(c.final_window_frames, 20);
  t.same(c.window_frame_indices, Array.from({ length: 20 }, (_, i) => i + 5));
  t.equal(c.status, 'ok');
  // The whole capture goes to the pool: its buffers are transferred (detached here), not copied.
  t.ok(clean.pixels.every((p) => p!.byteLength === 0), 'every pixel buffer transferred');
});

t.test('score jumps and the minimum final window come from the manifest', async (t) => {
  const dir = rawVariant(t, (m) => {
    m.modules.rgb_liveness.modes.rgb_sequence.score_jump_limit = 1e-9; // every change of score is a jump
    m.modules.rgb_liveness.modes.rgb_sequence.min_final_frames = 2;
  });
  const e = await engineFor(t, dir);
  const jumpy = capture('jumpy', 'rgb_sequence', [{ seed: 1 }, { seed: 2 }, { seed: 3 }]);
  const steady = capture('steady', 'rgb_sequence', [{ seed: 5 }, { seed: 5 }, { seed: 5 }]);
  const [j, s] = await e.infer({ module_id: 'rgb_liveness', captures: [jumpy, steady] });
  t.equal(j.status, 'retry');
  t.equal(j.reason, 'insufficient_final_window');
  t.equal(j.min_final_frames, 2);
  t.same(j.reset_events, [
    { source_index: 1, reason: 'score_jump' },
    { source_index: 2, reason: 'score_jump' },
  ]);
  t.equal(j.final_window_frames, 1, 'the window that was too short is still reported');
  t.same(j.window_frame_indices, [2]);
  t.equal(j.temporal_logit, null);
  t.equal(s.status, 'ok', 'identical frames never jump');
  t.same(s.reset_events, []);
  t.equal(s.final_window_frames, 3);
});

t.test('the manifest threshold decides alive, strictly', async (t) => {
  const e = await engineFor(t);
  const [probe] = await e.infer({ module_id: 'rgb_liveness', captures: [capture('p', 'rgb_single', [{ seed: 9 }])] });
  const score = probe.score!;
  // A deployment whose threshold is exactly this capture's score: not alive (rule 1 is strict).
  const dir = rawVariant(t, (m) => { m.modules.rgb_liveness.modes.rgb_single.threshold = score; });
  const e2 = await engineFor(t, dir);
  const [r] = await e2.infer({ module_id: 'rgb_liveness', captures: [capture('p', 'rgb_single', [{ seed: 9 }])] });
  t.equal(r.score, score, 'same score');
  t.equal(r.threshold, score);
  t.equal(r.alive, false);
});

t.test('colour: four complete phases fuse; anything less retries', async (t) => {
  const e = await engineFor(t);
  const caps = [
    capture('full', 'color', [{}, {}, {}, {}]),
    capture('prefix', 'color', [{}, {}], false),
    capture('failed-phase', 'color', [{}, { status: 'face_unavailable' }, {}, {}]),
    capture('failed-last', 'color', [{}, {}, {}, { status: 'dropped' }]),
  ];
  const r = await e.infer({ module_id: 'color_liveness', captures: caps });
  for (const x of r) checkShape(t, x);
  t.equal(r[0].status, 'ok');
  t.equal(r[0].decision_policy, 'color_fusion_v1');
  const l = r[0].color_logits!;
  t.ok(Math.abs(l.fused - (0.5 * l.difference + 0.5 * l.appearance)) < 1e-9, 'fused per the manifest weights');
  t.ok(Math.abs(r[0].score! - 1 / (1 + Math.exp(-l.fused))) < 1e-9, 'score = sigmoid(fused)');
  t.equal(r[1].reason, 'incomplete_capture');
  t.equal(r[2].reason, 'insufficient_final_window', 'complete=true with a failed middle phase is not incomplete_capture');
  t.equal(r[3].reason, 'terminal_frame_unavailable');
});

t.test('an inference error rejects with an Error', async (t) => {
  const e = await engineFor(t);
  const bad = capture('bad', 'rgb_single', [{}]);
  bad.pixels[0] = new Uint8Array(10); // not a 320x320 crop
  await t.rejects(e.infer({ module_id: 'rgb_liveness', captures: [bad] }), Error);
});
