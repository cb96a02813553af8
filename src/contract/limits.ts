// The wire contract's vocabulary and limits (interface-spec.md "Limits", contract.md): the
// leaf every other folder may import and that imports nothing. The client package keeps its
// own copy (client/src/wire.ts, so it builds without the server's sources);
// test/client/wire.test.ts fails when the two drift.

export type ModuleId = 'rgb_liveness' | 'color_liveness';
export const MODULE_IDS: readonly ModuleId[] = ['rgb_liveness', 'color_liveness'];

export type Mode = 'rgb_single' | 'rgb_sequence' | 'color';
export type FrameStatus = 'ok' | 'face_unavailable' | 'dropped';
export type Phase = 'white' | 'red' | 'green' | 'blue';
export type ImageEncoding = 'png' | 'rgb8';

export type Point = [number, number];

/** FastAPI-style validation error item. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

/** Every image is the 320 x 320 eye crop (PREPROCESS_PROFILE eye_crop_320_v1). */
export const CROP_SIZE = 320;
/** 320 x 320 x 3: the size of an rgb8 image part */
export const RGB8_BYTES = CROP_SIZE * CROP_SIZE * 3; // 307200

// Transport limits: crossing one is 413 payload_too_large.
export const MAX_BODY_BYTES = 32 * 1024 * 1024;
export const MAX_PART_BYTES = 1024 * 1024;
// 256 events at most, each with at most one image, plus metadata
export const MAX_PARTS = 257;
export const MAX_HEADER_BYTES = 8 * 1024;

// Count limits from interface-spec.md "Limits". Crossing one of the first three is 413
// payload_too_large (issue 3: "413 for body, part, batch and event counts"); the per-mode
// counts are packet rules and answer 422 like every other rule.

export const MAX_CAPTURES_PER_REQUEST = 32;
export const MAX_EVENTS_PER_REQUEST = 256;
export const MAX_EVENTS_PER_CAPTURE = 128;

export const MAX_EVENTS_RGB_SINGLE = 1;
export const MAX_EVENTS_COLOR = 4;

export const CAPTURE_ID_MAX_CHARS = 128;

/** A request with more problems than this stops collecting; the list says so in its last item. */
export const MAX_ISSUES = 1000;
