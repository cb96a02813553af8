import type { PreparedCapture } from '../packets/index.ts';
import type { Mode, ModuleId } from '../contract/index.ts';

export type RetryReason =
  | 'incomplete_capture'
  | 'terminal_frame_unavailable'
  | 'insufficient_final_window'
  | 'no_usable_frames';

export type ResetReason =
  | 'missing_index'
  | 'face_unavailable'
  | 'dropped'
  | 'geometry_discontinuity'
  | 'score_jump';

export interface ResetEvent {
  source_index: number;
  reason: ResetReason;
}

export interface ColorLogits {
  difference: number;
  appearance: number;
  fused: number;
}

/** The spec's result record; every key always present (contract "Result details"). */
export interface ResultRecord {
  capture_id: string;
  mode: Mode;
  status: 'ok' | 'retry';
  alive: boolean | null;
  score: number | null;
  reason: RetryReason | null;
  final_window_frames: number;
  window_frame_indices: number[];
  reset_events: ResetEvent[];
  single_score: number | null;
  temporal_logit: number | null;
  color_logits: ColorLogits | null;
  model_set: string;
  decision_policy: string;
  threshold: number;
  min_final_frames: number | null;
}

export interface InferenceJob {
  module_id: ModuleId;
  captures: PreparedCapture[];
}

export type ExecutionProvider = 'wasm' | 'webgpu' | 'native';

export interface ModuleReadiness {
  module_id: ModuleId;
  /** graphs loaded and warmed up */
  ready: boolean;
  model_set: string;
  /** the manifest's `trained`: false means random weights, verdicts that mean nothing */
  trained: boolean;
  decision_policy: string;
  threshold: number;
  execution_provider: ExecutionProvider | null;
  /** why the provider is unusual: WebGPU on a fallback (software) adapter, or WASM where
   * WebGPU was wanted and Dawn found no adapter */
  execution_note?: string;
  error: string | null;
  /** the per-mode policies behind the entry (rgb_liveness has a single-frame and a sequence
   * policy; the entry's own decision_policy and threshold show the first) */
  modes?: ModePolicy[];
}

/** What the HTTP layer needs from inference; implemented by the engine (in-process)
 * and by the cross-thread bridge used by API workers. */
export interface InferenceService {
  readiness(): ModuleReadiness[];
  /** `timing`, when given, is filled with the engine's stages of this job (a traced call) */
  infer(job: InferenceJob, timing?: InferenceTiming): Promise<ResultRecord[]>;
}

/** Where one job's time went inside the engine, for its trace: the wait for a pool thread and
 * the model's run, which the API worker cannot see from its side of the thread hop. Times are
 * epoch milliseconds (performance.timeOrigin + performance.now(), comparable across threads);
 * a time left out is a stage the job never reached. */
export interface InferenceTiming {
  /** the engine took the job */
  queued?: number;
  /** the first of its pool tasks left for a pool thread */
  started?: number;
  /** the last of its pool tasks came back */
  ended?: number;
  /** pool tasks its captures went out in (single frames of several calls may share one) */
  tasks?: number;
}

/** One mode's decision settings as the loaded manifest gives them. */
export interface ModePolicy {
  mode: Mode;
  decision_policy: string;
  threshold: number;
  min_final_frames: number | null;
}

/** Inference could not produce a capture's results (the engine failed, or gave no answer in
 * time): the verify call answers 500 inference_failed and its units are refunded. */
export class InferenceFailedError extends Error {}
