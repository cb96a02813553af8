// Valid metadata for each mode, as plain JSON objects that tests then break one field at a time.

import { ValidationFailure, ServiceError } from '../../src/errors/codes.ts';
import { parseMetadata } from '../../src/packets/validate.ts';
import type { ModuleId, ValidationIssue } from '../../src/packets/types.ts';

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

let counter = 0;
export const fakeSha = (n: number) => n.toString(16).padStart(64, '0');

export function okFrame(i: number, extra: Json = {}): Json {
  return {
    source_index: i,
    timestamp_us: 100_000 + i * 33_000,
    status: 'ok',
    source_size: [640, 480],
    eyes_xy: [[300, 200], [340, 202]],
    image: { part: `p${counter++}`, encoding: 'png', sha256: fakeSha(counter) },
    ...extra,
  };
}

export function failFrame(i: number, status: 'dropped' | 'face_unavailable' = 'dropped'): Json {
  return { source_index: i, timestamp_us: 100_000 + i * 33_000, status };
}

export function single(extra: Json = {}): Json {
  return {
    protocol_version: 1, capture_id: `cap-${counter++}`, mode: 'rgb_single', capture_profile: 'rgb_single_v1',
    preprocess_profile: 'eye_crop_320_v1', complete: true, frames: [okFrame(0)], ...extra,
  };
}

export function sequence(n = 20, extra: Json = {}): Json {
  return {
    protocol_version: 1, capture_id: `cap-${counter++}`, mode: 'rgb_sequence', capture_profile: 'rgb_contiguous_v1',
    preprocess_profile: 'eye_crop_320_v1', complete: true,
    frames: Array.from({ length: n }, (_, i) => okFrame(i)), ...extra,
  };
}

const PHASES = ['white', 'red', 'green', 'blue'];
export function color(n = 4, extra: Json = {}): Json {
  return {
    protocol_version: 1, capture_id: `cap-${counter++}`, mode: 'color', capture_profile: 'color_wrgb_v1',
    preprocess_profile: 'eye_crop_320_v1', complete: true,
    frames: Array.from({ length: n }, (_, i) => okFrame(i, { phase: PHASES[i], display_time_us: 100_000 + i * 33_000 - 5000 })),
    ...extra,
  };
}

/** The 422 items of a request, or [] when it is accepted. Any other exception fails the test. */
export function issuesOf(metadata: Json, moduleId: ModuleId = 'rgb_liveness'): ValidationIssue[] {
  const text = typeof metadata === 'string' ? metadata : JSON.stringify(metadata);
  try {
    parseMetadata(text, moduleId);
    return [];
  } catch (err) {
    if (err instanceof ValidationFailure) return err.detail;
    throw err;
  }
}

export function tooLarge(metadata: Json, moduleId: ModuleId = 'rgb_liveness'): ServiceError | null {
  try {
    parseMetadata(JSON.stringify(metadata), moduleId);
    return null;
  } catch (err) {
    if (err instanceof ServiceError) return err;
    if (err instanceof ValidationFailure) return null;
    throw err;
  }
}

/** Compact form for assertions: "loc.joined:type". */
export const brief = (issues: ValidationIssue[]) => issues.map((i) => `${i.loc.join('.')}:${i.type}`);
