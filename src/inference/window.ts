// The RGB sequence's final window (interface spec, states rule 5). Resets that need no
// model (missing index, failed frame, geometry) are found first, so the CNN only runs
// on frames that can still reach the final window; score-jump resets come after.
import type { FrameRecord } from '../packets/index.ts';
import type { ResetEvent } from './types.ts';

/** Spec limit: an RGB final window is at most 20 frames. */
export const MAX_FINAL_WINDOW = 20;

export const GEOMETRY = { minRatio: 0.65, maxRatio: 1.5, maxShift: 0.6 } as const;

/** Adjacent ok frames are continuous when 0.65 <= d_new/d_old <= 1.5 and
 * |m_new - m_old| / d_old <= 0.6, with d the eye distance and m the eye midpoint in
 * source-image coordinates. */
export function geometryContinuous(prev: FrameRecord, next: FrameRecord): boolean {
  const [[ax0, ay0], [ax1, ay1]] = prev.eyes_xy!;
  const [[bx0, by0], [bx1, by1]] = next.eyes_xy!;
  const dOld = Math.hypot(ax1 - ax0, ay1 - ay0);
  const dNew = Math.hypot(bx1 - bx0, by1 - by0);
  const ratio = dNew / dOld;
  const shift = Math.hypot((bx0 + bx1) / 2 - (ax0 + ax1) / 2, (by0 + by1) / 2 - (ay0 + ay1) / 2);
  return ratio >= GEOMETRY.minRatio && ratio <= GEOMETRY.maxRatio && shift / dOld <= GEOMETRY.maxShift;
}

export interface StructuralWindow {
  /** positions in `frames` of the frames that may reach the final window (the last
   * reset-free run of ok frames ending at the terminal frame, at most 20) */
  candidates: number[];
  resets: ResetEvent[];
}

/**
 * Walks the events in order. A frame whose source_index is not previous + 1 records
 * `missing_index` at that frame and the window restarts there; a `face_unavailable` or
 * `dropped` frame records its own status at its own index and the window restarts after
 * it; an ok frame discontinuous with the ok frame before it records
 * `geometry_discontinuity` and the window restarts at it. One frame can record a
 * missing index and its own failure.
 */
export function structuralWindow(frames: FrameRecord[]): StructuralWindow {
  const resets: ResetEvent[] = [];
  let start = 0;
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i];
    const prev = i > 0 ? frames[i - 1] : null;
    let gap = false;
    if (prev && f.source_index !== prev.source_index + 1) {
      resets.push({ source_index: f.source_index, reason: 'missing_index' });
      gap = true;
      start = i;
    }
    if (f.status !== 'ok') {
      resets.push({ source_index: f.source_index, reason: f.status });
      start = i + 1;
      continue;
    }
    if (prev && !gap && prev.status === 'ok' && !geometryContinuous(prev, f)) {
      resets.push({ source_index: f.source_index, reason: 'geometry_discontinuity' });
      start = i;
    }
  }
  const from = Math.max(start, frames.length - MAX_FINAL_WINDOW);
  const candidates: number[] = [];
  for (let i = from; i < frames.length; i++) candidates.push(i);
  return { candidates, resets };
}

/** Score-jump resets among the candidates: where |p_i - p_(i-1)| exceeds the manifest's
 * limit, a `score_jump` is recorded at frame i and the window restarts there. Returns
 * the offset into `probabilities` where the final window starts. */
export function scoreJumps(
  sourceIndices: number[],
  probabilities: number[],
  limit: number,
): { start: number; resets: ResetEvent[] } {
  const resets: ResetEvent[] = [];
  let start = 0;
  for (let i = 1; i < probabilities.length; i++) {
    if (Math.abs(probabilities[i] - probabilities[i - 1]) > limit) {
      resets.push({ source_index: sourceIndices[i], reason: 'score_jump' });
      start = i;
    }
  }
  return { start, resets };
}
