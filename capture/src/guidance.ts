// What to tell the person, from one frame's finding. Pure functions of numbers, so the rules
// are tested without a camera (test/capture/guidance.test.ts).

import type { FaceFinding, Point } from './engine.ts';

export type Guidance =
  | 'loading' | 'starting_camera' | 'no_face' | 'move_closer' | 'move_back' | 'turn_to_camera' | 'too_dark'
  | 'hold_still' | 'capturing' | 'flash_warning' | 'checking' | 'done' | 'try_again' | 'failed' | 'camera_denied'
  | 'camera_unavailable' | 'cancelled';

/** Default texts; an integrator may replace any of them (options.texts), e.g. to translate. */
export const TEXTS: Record<Guidance, string> = {
  loading: 'Getting ready…',
  starting_camera: 'Starting the camera. Allow access when your browser asks.',
  no_face: 'No face found. Look straight at the camera.',
  move_closer: 'Move closer to the camera.',
  move_back: 'Move back a little.',
  turn_to_camera: 'Turn your face to the camera.',
  too_dark: 'It is too dark. Move to a brighter place or turn on a light.',
  hold_still: 'Hold still.',
  capturing: 'Capturing. Keep looking at the camera.',
  flash_warning: 'The screen will flash white, red, green and blue for about two seconds. '
    + 'If flashing lights or colours can affect you (for example photosensitive epilepsy), skip this check.',
  checking: 'Checking…',
  done: 'Done.',
  try_again: 'That did not work. Please try again.',
  failed: 'The check could not be completed.',
  camera_denied: 'The camera is blocked. Allow camera access for this page and try again.',
  camera_unavailable: 'No camera could be opened.',
  cancelled: 'Cancelled.',
};

export interface GuidanceLimits {
  /** smallest eye distance in source pixels that makes a sharp enough crop; default 40 */
  minEyeDistance: number;
  /** largest eye distance as a fraction of the frame width; default 0.3 */
  maxEyeFraction: number;
  /** largest sideways offset of the nose tip from the eye midpoint, in eye distances; default 0.3 */
  maxTurn: number;
  /** darkest mean luma of the face box (0-255) still usable; default 45 */
  minLuma: number;
  /** largest move of the eye midpoint between analysed frames, in eye distances; default 0.12 */
  maxMove: number;
}

export const DEFAULT_LIMITS: GuidanceLimits = { minEyeDistance: 40, maxEyeFraction: 0.3, maxTurn: 0.3, minLuma: 45, maxMove: 0.12 };

const dist = (a: Point, b: Point) => Math.hypot(b[0] - a[0], b[1] - a[1]);
const mid = (e: [Point, Point]): Point => [(e[0][0] + e[1][0]) / 2, (e[0][1] + e[1][1]) / 2];

/** The advice for one frame; null when the face is fine for a capture. `previous` is the last
 * frame's finding, for "hold still". */
export function advise(f: FaceFinding | null, frameWidth: number, luma: number, previous: FaceFinding | null, limits: GuidanceLimits = DEFAULT_LIMITS): Guidance | null {
  if (!f) return 'no_face';
  const d = dist(f.eyes[0], f.eyes[1]);
  if (d < limits.minEyeDistance) return 'move_closer';
  if (d > limits.maxEyeFraction * frameWidth) return 'move_back';
  // the nose tip's offset along the eye line: near 0 for a frontal face, about +-0.5 d in profile
  const m = mid(f.eyes);
  const ux = (f.eyes[1][0] - f.eyes[0][0]) / d;
  const uy = (f.eyes[1][1] - f.eyes[0][1]) / d;
  if (Math.abs((f.nose[0] - m[0]) * ux + (f.nose[1] - m[1]) * uy) / d > limits.maxTurn) return 'turn_to_camera';
  if (luma < limits.minLuma) return 'too_dark';
  if (previous) {
    const dp = dist(previous.eyes[0], previous.eyes[1]);
    if (dist(mid(previous.eyes), m) / dp > limits.maxMove || d / dp > 1.1 || d / dp < 0.9) return 'hold_still';
  }
  return null;
}

/** Mean luma (BT.601) of the box, sampled on a grid of at most 32 x 32 points. */
export function boxLuma(img: { data: Uint8ClampedArray; width: number; height: number }, box: FaceFinding['box']): number {
  const x0 = Math.max(0, Math.floor(box.x));
  const y0 = Math.max(0, Math.floor(box.y));
  const x1 = Math.min(img.width, Math.ceil(box.x + box.width));
  const y1 = Math.min(img.height, Math.ceil(box.y + box.height));
  if (x1 <= x0 || y1 <= y0) return 0;
  const sx = Math.max(1, Math.floor((x1 - x0) / 32));
  const sy = Math.max(1, Math.floor((y1 - y0) / 32));
  let sum = 0;
  let n = 0;
  for (let y = y0; y < y1; y += sy) {
    for (let x = x0; x < x1; x += sx) {
      const o = (y * img.width + x) * 4;
      sum += 0.299 * img.data[o]! + 0.587 * img.data[o + 1]! + 0.114 * img.data[o + 2]!;
      n++;
    }
  }
  return sum / n;
}
