// rgb_sequence: structural resets first (no model needed), then the frame ensemble over
// the candidates in model batches of up to MAX_BATCH, score-jump resets, and the decision
// over the final window: the temporal head, or the window mean.
import type { PreparedCapture } from '../../packets/index.ts';
import { decide, retry } from '../decision.ts';
import { MAX_BATCH, minFinalFrames } from '../manifest.ts';
import { logit } from '../scores.ts';
import type { ResultRecord } from '../types.ts';
import { scoreJumps, structuralWindow } from '../window.ts';
import { framePixels } from './pixels.ts';
import type { CaptureMode, ModeContext } from './types.ts';

async function one({ runner, manifest, policy }: ModeContext, c: PreparedCapture): Promise<ResultRecord> {
  const spec = manifest.modules.rgb_liveness!.modes.rgb_sequence!;
  const { packet } = c;
  const frames = packet.frames;
  if (!packet.complete) return retry(packet, policy, 'incomplete_capture');
  const structural = structuralWindow(frames);
  if (!frames.some((f) => f.status === 'ok')) return retry(packet, policy, 'no_usable_frames', { reset_events: structural.resets });
  if (frames[frames.length - 1].status !== 'ok') {
    return retry(packet, policy, 'terminal_frame_unavailable', { reset_events: structural.resets });
  }
  const candidates = structural.candidates;
  const probability: number[] = [];
  let featureSize = 0;
  let features: Float32Array | null = null;
  for (let from = 0; from < candidates.length; from += MAX_BATCH) {
    const batch = candidates.slice(from, from + MAX_BATCH);
    const out = await runner.runFrames(batch.map((i) => framePixels(c, i)));
    probability.push(...out.probability);
    if (out.features) {
      featureSize = out.featureSize;
      features ??= new Float32Array(candidates.length * featureSize);
      features.set(out.features, from * featureSize);
    }
  }
  const sourceIndices = candidates.map((i) => frames[i].source_index);
  const jumps = scoreJumps(sourceIndices, probability, spec.score_jump_limit);
  const windowIndices = sourceIndices.slice(jumps.start);
  const diagnostics = {
    final_window_frames: windowIndices.length,
    window_frame_indices: windowIndices,
    reset_events: [...structural.resets, ...jumps.resets],
  };
  if (windowIndices.length < minFinalFrames(spec)) return retry(packet, policy, 'insufficient_final_window', diagnostics);
  if (spec.decision_policy === 'temporal_head_v1') {
    const window = features!.subarray(jumps.start * featureSize);
    const head = await runner.runTemporal(window, windowIndices.length);
    return decide(packet, policy, head.probability, { ...diagnostics, temporal_logit: head.logit });
  }
  // window_mean_v1: the mean live probability over the final window.
  const window = probability.slice(jumps.start);
  const score = window.reduce((s, p) => s + p, 0) / window.length;
  return decide(packet, policy, score, { ...diagnostics, temporal_logit: logit(score) });
}

export const runSequence: CaptureMode = async (ctx, captures) => {
  const out: ResultRecord[] = [];
  for (const c of captures) out.push(await one(ctx, c));
  return out;
};
