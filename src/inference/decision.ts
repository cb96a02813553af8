// Result records (interface spec "Result record" and decision rules; contract "Result
// details"). Every key is always present; diagnostics are null outside their mode.
import type { CapturePacket } from '../packets/index.ts';
import type { ColorLogits, ResetEvent, ResultRecord, RetryReason } from './types.ts';

export interface Policy {
  model_set: string;
  decision_policy: string;
  threshold: number;
  /** the rgb_sequence deployment setting; null in every other mode */
  min_final_frames: number | null;
}

export interface Diagnostics {
  final_window_frames?: number;
  window_frame_indices?: number[];
  reset_events?: ResetEvent[];
  single_score?: number | null;
  temporal_logit?: number | null;
  color_logits?: ColorLogits | null;
}

function record(packet: CapturePacket, policy: Policy, d: Diagnostics): Omit<ResultRecord, 'status' | 'alive' | 'score' | 'reason'> {
  return {
    capture_id: packet.capture_id,
    mode: packet.mode,
    final_window_frames: d.final_window_frames ?? 0,
    window_frame_indices: d.window_frame_indices ?? [],
    reset_events: d.reset_events ?? [],
    single_score: d.single_score ?? null,
    temporal_logit: d.temporal_logit ?? null,
    color_logits: d.color_logits ?? null,
    model_set: policy.model_set,
    decision_policy: policy.decision_policy,
    threshold: policy.threshold,
    min_final_frames: policy.min_final_frames,
  };
}

/** Rules 1 and 2: alive exactly when the score is strictly greater than the threshold. */
export function decide(packet: CapturePacket, policy: Policy, score: number, d: Diagnostics = {}): ResultRecord {
  if (!Number.isFinite(score) || score < 0 || score > 1) {
    throw new Error(`score ${score} for capture ${packet.capture_id} is not a probability`);
  }
  const { capture_id, mode, ...rest } = record(packet, policy, d);
  return { capture_id, mode, status: 'ok', alive: score > policy.threshold, score, reason: null, ...rest };
}

/** Rule 3: a retry has alive and score null and names its reason; scores that were
 * computed on the way (e.g. a too-short window) are not reported as diagnostics. */
export function retry(packet: CapturePacket, policy: Policy, reason: RetryReason, d: Diagnostics = {}): ResultRecord {
  const { capture_id, mode, ...rest } = record(packet, policy, { ...d, single_score: null, temporal_logit: null, color_logits: null });
  return { capture_id, mode, status: 'retry', alive: null, score: null, reason, ...rest };
}
