// The wire contract as a client sees it (interface-spec.md and contract.md): packet shapes,
// answers, limits and error codes. Copied here, not imported from the service, because the
// package must build and run without the server's sources; test/client/wire.test.ts fails
// when a copy drifts from what the service declares.

export type ModuleId = 'rgb_liveness' | 'color_liveness';
export const MODULE_IDS: readonly ModuleId[] = ['rgb_liveness', 'color_liveness'];

export type Mode = 'rgb_single' | 'rgb_sequence' | 'color';
export type FrameStatus = 'ok' | 'face_unavailable' | 'dropped';
export type Phase = 'white' | 'red' | 'green' | 'blue';
export type ImageEncoding = 'png' | 'rgb8';
export type Point = [number, number];

/** The module table of interface-spec.md: each mode's capture_profile. */
export const CAPTURE_PROFILE: Readonly<Record<Mode, string>> = {
  rgb_single: 'rgb_single_v1',
  rgb_sequence: 'rgb_contiguous_v1',
  color: 'color_wrgb_v1',
};

export const PREPROCESS_PROFILE = 'eye_crop_320_v1';
export const CROP_SIZE = 320;
/** 320 x 320 x 3: the size of an rgb8 image part */
export const RGB8_BYTES = CROP_SIZE * CROP_SIZE * 3;

/** Limits the service enforces (docs/endpoints.md "Verify: order of checks and limits"). */
export const LIMITS = {
  bodyBytes: 32 * 1024 * 1024,
  partBytes: 1024 * 1024,
  parts: 257,
  capturesPerRequest: 32,
  eventsPerRequest: 256,
  eventsPerCapture: 128,
  idempotencyKeyMaxLength: 200,
} as const;

/** Every `error.code` the service answers, with its HTTP status. */
export const ERROR_STATUS = {
  invalid_idempotency_key: 400,
  invalid_content_length: 400,
  invalid_token: 401,
  invalid_credentials: 401,
  invalid_current_password: 403,
  invalid_session: 401,
  invalid_session_token: 401,
  session_not_allowed: 403,
  session_not_found: 404,
  session_captures_exceeded: 429,
  session_rate_limited: 429,
  module_forbidden: 403,
  module_disabled: 403,
  login_disabled: 403,
  forbidden: 403,
  csrf_failed: 403,
  module_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  request_in_progress: 409,
  idempotency_conflict: 409,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  invalid_input: 422,
  quota_exceeded: 429,
  too_many_attempts: 429,
  internal_error: 500,
  inference_failed: 500,
  settlement_failed: 500,
  server_busy: 503,
  module_unavailable: 503,
  store_unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ImageDescriptor {
  part: string;
  encoding: ImageEncoding;
  sha256: string;
}

interface FrameRecordBase {
  source_index: number;
  timestamp_us: number;
  phase?: Phase;
  display_time_us?: number;
}

/** A frame with a face: source_size, eyes_xy and image are required (the service answers 422
 * without them). */
export interface OkFrameRecord extends FrameRecordBase {
  status: 'ok';
  source_size: [number, number];
  eyes_xy: [Point, Point];
  image: ImageDescriptor;
}

/** A `face_unavailable` or `dropped` event: no image data. */
export interface EventFrameRecord extends FrameRecordBase {
  status: Exclude<FrameStatus, 'ok'>;
  source_size?: never;
  eyes_xy?: never;
  image?: never;
}

export type FrameRecord = OkFrameRecord | EventFrameRecord;

export interface CapturePacket {
  protocol_version: 1;
  capture_id: string;
  mode: Mode;
  capture_profile: string;
  preprocess_profile: string;
  complete: boolean;
  frames: FrameRecord[];
}

export interface BatchEnvelope {
  captures: CapturePacket[];
}

/** FastAPI-style validation error item of a 422. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

export type RetryReason = 'incomplete_capture' | 'terminal_frame_unavailable' | 'insufficient_final_window' | 'no_usable_frames';
export type ResetReason = 'missing_index' | 'face_unavailable' | 'dropped' | 'geometry_discontinuity' | 'score_jump';

export interface ResultRecord {
  capture_id: string;
  mode: Mode;
  status: 'ok' | 'retry';
  alive: boolean | null;
  score: number | null;
  reason: RetryReason | null;
  final_window_frames: number;
  window_frame_indices: number[];
  reset_events: { source_index: number; reason: ResetReason }[];
  single_score: number | null;
  temporal_logit: number | null;
  color_logits: { difference: number; appearance: number; fused: number } | null;
  model_set: string;
  decision_policy: string;
  threshold: number;
  min_final_frames: number | null;
}

export interface UsageRecord {
  module_id: string;
  limit: number | null;
  period: 'day' | 'month' | 'never';
  used: number;
  remaining: number | null;
  reset_at: string | null;
}

export interface VerifyResponse {
  request_id: string;
  module_id: string;
  charged_units: number;
  results: ResultRecord[];
  usage: UsageRecord[];
}

export interface MeResponse {
  token: { id: string; name: string; expires_at: string | null; demo: boolean };
  usage: UsageRecord[];
}

/** POST /v1/sessions: `session_token` is shown once; hand it to the device. */
export interface SessionCreated {
  session_id: string;
  session_token: string;
  module_id: ModuleId;
  expires_at: string;
  max_captures: number;
}

export type SessionState = 'active' | 'expired' | 'exhausted' | 'revoked';

/** One verify call made with a session: `results` exactly as its answer had them. */
export interface SessionVerification {
  request_id: string;
  status: 'completed' | 'pending' | 'refunded' | 'settlement_failed';
  charged_units: number;
  results: ResultRecord[] | null;
}

/** GET /v1/sessions/{session_id}: what a backend decides from, server to server. */
export interface SessionStatus {
  session_id: string;
  module_id: ModuleId;
  state: SessionState;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  max_captures: number;
  captures_used: number;
  results: SessionVerification[];
}

/** GET /v1/me with a session token. */
export interface SessionMeResponse {
  session: { session_id: string; module_id: ModuleId; state: SessionState; expires_at: string; max_captures: number; captures_used: number; captures_left: number };
}

export interface ModulesResponse {
  modules: { module_id: ModuleId; status: 'available' | 'disabled' | 'unavailable' }[];
}
