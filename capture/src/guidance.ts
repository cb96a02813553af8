// What to tell the person, from one frame's finding. Pure functions of numbers, so the rules
// are tested without a camera (test/capture/guidance.test.ts).

import type { FaceFinding, Point } from './engine.ts';

export type Guidance =
  | 'loading' | 'starting_camera' | 'no_face' | 'move_to_centre' | 'straighten_head' | 'move_closer' | 'move_back' | 'turn_to_camera' | 'too_dark'
  | 'hold_still' | 'capturing' | 'flash_warning' | 'checking' | 'done' | 'try_again' | 'failed' | 'camera_denied'
  | 'camera_unavailable' | 'cancelled';

/** Default texts; an integrator may replace any of them (options.texts), e.g. to translate. */
export const TEXTS: Record<Guidance, string> = {
  loading: 'Getting ready…',
  starting_camera: 'Starting the camera. Allow access when your browser asks.',
  no_face: 'No face found. Look straight at the camera.',
  move_to_centre: 'Move your face to the middle of the picture.',
  straighten_head: 'Hold your head upright.',
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
  /** largest head turn (|yawOf|, 0 frontal, towards 1 in profile) still captured; default
   * MAX_TURN. A turned head's far eye is foreshortened and the landmarks miss it (13 % of the
   * eye distance on the test's three-quarter face), so such a face is asked to turn instead */
  maxTurn: number;
  /** darkest mean luma of the face box (0-255) still usable; default 45 */
  minLuma: number;
  /** largest move of the eye midpoint between analysed frames, in eye distances; default 0.12 */
  maxMove: number;
}

/** The default head-turn limit (|yawOf|). Set from measurements (test/capture/landmarks.test.ts
 * prints them) on the hand-marked photographs, each also mirrored, rescaled, shifted, brightened
 * and through the camera's YUV 4:2:0: the five faces marked frontal (several of them turned a little,
 * as people stand in photographs) read at most 0.30, the three-quarter face at least
 * 0.35; the limit sits between them. */
export const MAX_TURN = 0.325;

export const DEFAULT_LIMITS: GuidanceLimits = { minEyeDistance: 40, maxEyeFraction: 0.3, maxTurn: MAX_TURN, minLuma: 45, maxMove: 0.12 };

const dist = (a: Point, b: Point) => Math.hypot(b[0] - a[0], b[1] - a[1]);
const mid = (e: [Point, Point]): Point => [(e[0][0] + e[1][0]) / 2, (e[0][1] + e[1][1]) / 2];
const mean = (p: readonly Point[], from: number, to: number): Point => {
  let x = 0;
  let y = 0;
  for (let i = from; i <= to; i++) {
    x += p[i]![0];
    y += p[i]![1];
  }
  return [x / (to - from + 1), y / (to - from + 1)];
};

/** How far the head is turned aside, from the 68 landmarks (iBUG order): where the nose line
 * (the mean of points 27-30, bridge to tip) sits between the outer eye corners (36 and 45),
 * measured along the eye line (eye 36-41 to eye 42-47, so a tilted head reads the same as an
 * upright one): (a - b) / (a + b), a and b the nose's distances to either corner. A frontal
 * face gives about 0; as the head turns the nose comes forward and the far eye narrows, so the
 * value goes towards +1 (nose near the image's right corner) or -1, and past them in profile.
 * Of the asymmetries tried (nose tip against the jaw's ends, against the inner eye corners,
 * under the nose against the mouth corners, the two eyes' widths), this one kept the test's
 * frontal and three-quarter faces furthest apart across rescaling, mirroring and shifts: the
 * jaw's outline wanders with hair and background. */
export function yawOf(p: readonly Point[]): number {
  if (p.length < 48) return 0;
  const e0 = mean(p, 36, 41);
  const e1 = mean(p, 42, 47);
  const len = Math.hypot(e1[0] - e0[0], e1[1] - e0[1]);
  if (!(len > 0)) return 0;
  const ux = (e1[0] - e0[0]) / len;
  const uy = (e1[1] - e0[1]) / len;
  const along = (q: Point) => q[0] * ux + q[1] * uy;
  const nose = along(mean(p, 27, 30));
  const a = nose - along(p[36]!);
  const b = along(p[45]!) - nose;
  // the nose beyond an eye corner: a profile (or landmarks that make no sense)
  if (a <= 0) return -1;
  if (b <= 0) return 1;
  return (a - b) / (a + b);
}

/** Whether the eyes can be sent as they were found: both inside the frame ([0, w] x [0, h], the
 * service's rule) and more side by side than one above the other (sorted by x, the service
 * needs x1 - x0 >= 2; a head rolled past 45 degrees is asked to straighten first). */
export function eyesPlaced(eyes: readonly [Point, Point], frameWidth: number, frameHeight: number): 'inside' | 'outside' | 'rolled' {
  for (const [x, y] of eyes) if (!(x >= 0 && x <= frameWidth && y >= 0 && y <= frameHeight)) return 'outside';
  const dx = Math.abs(eyes[1][0] - eyes[0][0]);
  const dy = Math.abs(eyes[1][1] - eyes[0][1]);
  return dx < 2 || dy > dx ? 'rolled' : 'inside';
}

/** The advice for one frame; null when the face is fine for a capture. `previous` is the last
 * frame's finding, for "hold still". `frameHeight` (the frame's, for the eyes' place; a caller
 * of the former signature gives none and gets only the width checked). */
export function advise(f: FaceFinding | null, frameWidth: number, luma: number, previous: FaceFinding | null, limits: GuidanceLimits = DEFAULT_LIMITS, frameHeight = Infinity): Guidance | null {
  if (!f) return 'no_face';
  // eyes the service would refuse, or that a clamp would move: the crop is cut from where the
  // eyes are, never from a point moved inside the frame
  const placed = eyesPlaced(f.eyes, frameWidth, frameHeight);
  if (placed === 'outside') return 'move_to_centre';
  if (placed === 'rolled') return 'straighten_head';
  // the turn first: a turned head also shows its eyes closer together, and "move closer" would
  // be the wrong advice for it
  if (Math.abs(f.yaw) > limits.maxTurn) return 'turn_to_camera';
  const d = dist(f.eyes[0], f.eyes[1]);
  if (d < limits.minEyeDistance) return 'move_closer';
  if (d > limits.maxEyeFraction * frameWidth) return 'move_back';
  const m = mid(f.eyes);
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
