import t from 'tap';
import { decide, retry, type Policy } from '../../src/inference/decision.ts';
import { capture } from './helpers.ts';

const packet = capture('d', 'rgb_single', []).packet;
const policy: Policy = { model_set: 'raw_v1', decision_policy: 'single_frame_v1', threshold: 0.5, min_final_frames: null };

t.test('alive exactly when the score is strictly above the threshold', async (t) => {
  t.equal(decide(packet, policy, 0.5000001).alive, true);
  t.equal(decide(packet, policy, 0.5).alive, false, 'equal to the threshold is not alive');
  t.equal(decide(packet, policy, 0.2).alive, false);
  t.equal(decide(packet, { ...policy, threshold: 0 }, 0).alive, false);
  t.equal(decide(packet, { ...policy, threshold: 0 }, 1e-12).alive, true);
});

t.test('a score must be a probability', async (t) => {
  t.throws(() => decide(packet, policy, Number.NaN));
  t.throws(() => decide(packet, policy, 1.01));
  t.throws(() => decide(packet, policy, -0.1));
});

t.test('retry: alive and score null, the reason set, diagnostics of a score dropped', async (t) => {
  const r = retry(packet, policy, 'insufficient_final_window', { final_window_frames: 1, window_frame_indices: [3], temporal_logit: 2, single_score: 0.9 });
  t.match(r, { status: 'retry', alive: null, score: null, reason: 'insufficient_final_window', final_window_frames: 1, temporal_logit: null, single_score: null });
  t.same(r.window_frame_indices, [3]);
});

t.test('an ok record carries the policy, nulls where its mode has none', async (t) => {
  const r = decide(packet, policy, 0.7, { single_score: 0.7 });
  t.same(r, {
    capture_id: 'd', mode: 'rgb_single', status: 'ok', alive: true, score: 0.7, reason: null,
    final_window_frames: 0, window_frame_indices: [], reset_events: [], single_score: 0.7, temporal_logit: null,
    color_logits: null, model_set: 'raw_v1', decision_policy: 'single_frame_v1', threshold: 0.5, min_final_frames: null,
  });
});
