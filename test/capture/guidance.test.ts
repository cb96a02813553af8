import t from 'tap';
import { DEFAULT_LIMITS, MAX_TURN, TEXTS, advise, boxLuma, eyesPlaced, yawOf } from '../../capture/src/guidance.ts';
import type { FaceFinding, Point } from '../../capture/src/engine.ts';

// The capture component's guidance rules, without a camera: what the person is told for each
// kind of frame, in the order the rules apply.
const face = (eyes: [[number, number], [number, number]], yaw = 0): FaceFinding => ({
  eyes,
  landmarks: [],
  yaw,
  box: { x: eyes[0][0] - 40, y: eyes[0][1] - 40, width: eyes[1][0] - eyes[0][0] + 80, height: 160 },
  score: 0.9,
});
const good = face([[280, 200], [360, 200]]);

t.equal(advise(null, 640, 120, null), 'no_face');
t.equal(advise(face([[300, 200], [330, 200]]), 640, 120, null), 'move_closer', 'eyes 30 px apart: too far for a sharp crop');
t.equal(advise(face([[200, 200], [420, 200]]), 640, 120, null), 'move_back', 'eyes 220 px apart in a 640 px frame');
t.equal(advise(face([[280, 200], [360, 200]], MAX_TURN + 0.01), 640, 120, null), 'turn_to_camera', 'turned aside, to the right');
t.equal(advise(face([[280, 200], [360, 200]], -MAX_TURN - 0.01), 640, 120, null), 'turn_to_camera', 'turned aside, to the left');
t.equal(advise(face([[280, 200], [360, 200]], MAX_TURN - 0.01), 640, 120, null), null, 'a slight turn is fine');
t.equal(advise(face([[310, 200], [335, 200]], MAX_TURN + 0.1), 640, 120, null), 'turn_to_camera', 'turned and eyes close together: turn first, not move closer');
t.equal(advise(good, 640, 30, null), 'too_dark');
t.equal(advise(good, 640, 120, face([[260, 200], [340, 200]])), 'hold_still', 'moved 20 px (a quarter of the eye distance) since the last frame');
t.equal(advise(good, 640, 120, face([[285, 200], [355, 200]])), 'hold_still', 'the eye distance grew by 14 %');
t.equal(advise(good, 640, 120, face([[282, 201], [362, 201]])), null, 'steady');
t.equal(advise(good, 640, 120, null), null, 'a first good frame');
t.equal(advise(face([[280, 200], [360, 260]]), 640, 120, null), null, 'a tilted head is fine: the crop turns with the eyes');
// eyes the service would refuse (it answered 422 eyes_too_close for a head rolled on its side)
// or that a clamp would have moved into the frame (the crop cut from where the eyes are not)
t.equal(advise(face([[320, 200], [321, 260]]), 640, 120, null, DEFAULT_LIMITS, 480), 'straighten_head', 'a head rolled on its side: x1 - x0 is 1');
t.equal(advise(face([[320, 200], [350, 260]]), 640, 120, null, DEFAULT_LIMITS, 480), 'straighten_head', 'rolled past 45 degrees');
t.equal(advise(face([[320, 200], [380, 259]]), 640, 120, null, DEFAULT_LIMITS, 480), null, 'rolled under 45 degrees: the crop turns with the eyes');
t.equal(advise(face([[-12, 200], [48, 201]]), 640, 120, null, DEFAULT_LIMITS, 480), 'move_to_centre', 'an eye left of the frame');
t.equal(advise(face([[600, 200], [660, 201]]), 640, 120, null, DEFAULT_LIMITS, 480), 'move_to_centre', 'an eye right of it');
t.equal(advise(face([[280, 450], [360, 490]]), 640, 120, null, DEFAULT_LIMITS, 480), 'move_to_centre', 'an eye below it');
t.equal(advise(face([[280, 450], [360, 490]]), 640, 120, null), null, 'the former signature (no height) checks the width only');
t.equal(advise(face([[0, 0], [80, 0]]), 640, 120, null, DEFAULT_LIMITS, 480), null, 'the frame\'s edges are inside, as the service says');
t.equal(eyesPlaced([[0, 0], [640, 480]], 640, 480), 'inside');
t.equal(eyesPlaced([[0, 0], [640.5, 10]], 640, 480), 'outside');
t.equal(eyesPlaced([[10, 10], [11, 10]], 640, 480), 'rolled', 'x1 - x0 under 2');
t.equal(eyesPlaced([[10, 10], [Number.NaN, 10]], 640, 480), 'outside', 'not a number is not inside');
t.same(Object.keys(DEFAULT_LIMITS).sort(), ['maxEyeFraction', 'maxMove', 'maxTurn', 'minEyeDistance', 'minLuma']);
for (const g of ['no_face', 'move_to_centre', 'straighten_head', 'move_closer', 'move_back', 'hold_still', 'turn_to_camera', 'too_dark'] as const) t.ok(TEXTS[g].length > 5, `${g}: ${TEXTS[g]}`);

t.test('yawOf: the nose line between the outer eye corners, along the eye line', async (t) => {
  // a schematic 68-point face: eyes 36-41 and 42-47 (outer corners 36 and 45), nose 27-30
  const points = (noseX: number, tilt = 0): Point[] => {
    const p: Point[] = Array.from({ length: 68 }, (): Point => [0, 0]);
    const put = (i: number, x: number, y: number) => {
      // rotated by `tilt` radians about (320, 240): a tilted head
      const c = Math.cos(tilt);
      const s = Math.sin(tilt);
      p[i] = [320 + (x - 320) * c - (y - 240) * s, 240 + (x - 320) * s + (y - 240) * c];
    };
    const eye: [number, number][] = [[-20, 0], [-10, -5], [10, -5], [20, 0], [10, 5], [-10, 5]];
    eye.forEach(([dx, dy], k) => {
      put(36 + k, 280 + dx, 200 + dy);
      put(42 + k, 360 + dx, 200 + dy);
    });
    for (let i = 27; i <= 30; i++) put(i, noseX, 200 + (i - 27) * 15);
    return p;
  };
  t.equal(yawOf(points(320)), 0, 'nose half-way between the outer eye corners: frontal');
  t.equal(yawOf(points(350)), 0.5, 'nose three quarters of the way to the right corner');
  t.equal(yawOf(points(290)), -0.5, 'to the left corner: the same, negative');
  t.ok(Math.abs(yawOf(points(350, 0.4)) - 0.5) < 1e-9, 'a tilted head reads the same');
  t.equal(yawOf(points(390)), 1, 'nose beyond the eye corner: profile');
  t.equal(yawOf(points(250)), -1);
  t.equal(yawOf([]), 0, 'no landmarks: no estimate');
});

t.test('boxLuma: the mean luma of the box, clipped to the image', async (t) => {
  const w = 64;
  const h = 48;
  const data = new Uint8ClampedArray(w * h * 4);
  for (let i = 0; i < w * h; i++) {
    const x = i % w;
    data.set(x < 32 ? [200, 200, 200, 255] : [20, 20, 20, 255], i * 4);
  }
  const img = { data, width: w, height: h };
  t.equal(Math.round(boxLuma(img, { x: 0, y: 0, width: 32, height: 48 })), 200);
  t.equal(Math.round(boxLuma(img, { x: 32, y: 0, width: 100, height: 100 })), 20, 'clipped at the right edge');
  t.equal(boxLuma(img, { x: 100, y: 100, width: 10, height: 10 }), 0, 'outside the image');
});
