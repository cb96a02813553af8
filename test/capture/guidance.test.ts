import t from 'tap';
import { DEFAULT_LIMITS, TEXTS, advise, boxLuma } from '../../capture/src/guidance.ts';
import type { FaceFinding } from '../../capture/src/engine.ts';

// The capture component's guidance rules, without a camera: what the person is told for each
// kind of frame, in the order the rules apply.
const face = (eyes: [[number, number], [number, number]], nose?: [number, number]): FaceFinding => ({
  eyes,
  nose: nose ?? [(eyes[0][0] + eyes[1][0]) / 2, (eyes[0][1] + eyes[1][1]) / 2 + 40],
  box: { x: eyes[0][0] - 40, y: eyes[0][1] - 40, width: eyes[1][0] - eyes[0][0] + 80, height: 160 },
  score: 0.9,
});
const good = face([[280, 200], [360, 200]]);

t.equal(advise(null, 640, 120, null), 'no_face');
t.equal(advise(face([[300, 200], [330, 200]]), 640, 120, null), 'move_closer', 'eyes 30 px apart: too far for a sharp crop');
t.equal(advise(face([[200, 200], [420, 200]]), 640, 120, null), 'move_back', 'eyes 220 px apart in a 640 px frame');
t.equal(advise(face([[280, 200], [360, 200]], [345, 240]), 640, 120, null), 'turn_to_camera', 'the nose 25 px (0.31 eye distances) aside');
t.equal(advise(good, 640, 30, null), 'too_dark');
t.equal(advise(good, 640, 120, face([[260, 200], [340, 200]])), 'hold_still', 'moved 20 px (a quarter of the eye distance) since the last frame');
t.equal(advise(good, 640, 120, face([[285, 200], [355, 200]])), 'hold_still', 'the eye distance grew by 14 %');
t.equal(advise(good, 640, 120, face([[282, 201], [362, 201]])), null, 'steady');
t.equal(advise(good, 640, 120, null), null, 'a first good frame');
t.equal(advise(face([[280, 200], [360, 260]]), 640, 120, null), null, 'a tilted head is fine: the crop turns with the eyes');
t.same(Object.keys(DEFAULT_LIMITS).sort(), ['maxEyeFraction', 'maxMove', 'maxTurn', 'minEyeDistance', 'minLuma']);
for (const g of ['no_face', 'move_closer', 'move_back', 'hold_still', 'turn_to_camera', 'too_dark'] as const) t.ok(TEXTS[g].length > 5, `${g}: ${TEXTS[g]}`);

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
