import t from 'tap';
import { eyeCrop320, cropSamplePoint } from '../../client/src/index.ts';

// 4x4 source: R = 10x + 40y, G = 200 - 10x, B = 7 at pixel (x, y). Bilinear sampling of a
// linear function is exact, so expected values are worked out by hand below.
function ramp4(): { data: Uint8Array; width: number; height: number } {
  const data = new Uint8Array(4 * 4 * 3);
  for (let y = 0; y < 4; y++) {
    for (let x = 0; x < 4; x++) {
      data[(y * 4 + x) * 3] = 10 * x + 40 * y;
      data[(y * 4 + x) * 3 + 1] = 200 - 10 * x;
      data[(y * 4 + x) * 3 + 2] = 7;
    }
  }
  return { data, width: 4, height: 4 };
}

const px = (crop: Uint8Array, i: number, j: number) => Array.from(crop.subarray((j * 320 + i) * 3, (j * 320 + i) * 3 + 3));

t.test('hand-computed pixels of a level eye line', async (t) => {
  // eyes (1,1) and (3,1): d = 2, S = 12, theta = 0, centre c = m + 0.5 d v = (2, 2).
  const crop = eyeCrop320(ramp4(), [[1, 1], [3, 1]]);
  t.equal(crop.length, 307200);
  // (160,160): offset ((160.5/320) - 0.5) * 12 = 0.01875, sample (1.51875, 1.51875):
  // R = 10*1.51875 + 40*1.51875 = 75.9375 -> 76; G = 200 - 15.1875 = 184.8125 -> 185; B = 7.
  t.same(px(crop, 160, 160), [76, 185, 7]);
  t.same(cropSamplePoint([[1, 1], [3, 1]], 160, 160).map((v) => +v.toFixed(10)), [1.51875, 1.51875]);
  // (100,160): x offset (100.5/320 - 0.5) * 12 = -2.23125 -> sample x = -0.73125: neighbour
  // column -1 is outside (black), column 0 weighs 0.26875; rows 1 and 2 weigh 0.48125 / 0.51875.
  // R = 0.26875 * (0.48125*40 + 0.51875*80) = 16.3265625 -> 16; G = 0.26875*200 = 53.75 -> 54;
  // B = 0.26875*7 = 1.88125 -> 2.
  t.same(px(crop, 100, 160), [16, 54, 2]);
  // Corners sample far outside the 4x4 source: black.
  t.same(px(crop, 0, 0), [0, 0, 0]);
  t.same(px(crop, 319, 319), [0, 0, 0]);
});

t.test('hand-computed pixel of a 90-degree eye line (u points down, v points left)', async (t) => {
  // eyes (2,0) and (2,2): d = 2, theta = 90deg, u = (0,1), v = (-1,0), c = (2,1) + (-1,0) = (1,1).
  // (160,160): offset 0.01875 along u (y) and along v (-x): sample (1 - 0.01875 - 0.5, 1 + 0.01875 - 0.5)
  // = (0.48125, 0.51875): R = 4.8125 + 20.75 = 25.5625 -> 26; G = 200 - 4.8125 = 195.1875 -> 195.
  const crop = eyeCrop320(ramp4(), [[2, 0], [2, 2]]);
  t.same(px(crop, 160, 160), [26, 195, 7]);
});

t.test('RGBA sources give the same crop as RGB', async (t) => {
  const rgb = ramp4();
  const rgba = new Uint8ClampedArray(4 * 4 * 4);
  for (let p = 0; p < 16; p++) {
    rgba.set(rgb.data.subarray(p * 3, p * 3 + 3), p * 4);
    rgba[p * 4 + 3] = 128;
  }
  const a = eyeCrop320(rgb, [[1, 1], [3, 1]]);
  const b = eyeCrop320({ data: rgba, width: 4, height: 4 }, [[1, 1], [3, 1]]);
  t.ok(Buffer.from(a).equals(Buffer.from(b)));
  t.throws(() => eyeCrop320({ data: new Uint8Array(10), width: 4, height: 4 }, [[1, 1], [3, 1]]));
  t.throws(() => eyeCrop320(rgb, [[1, 1], [1, 1]]), /distinct/);
});

function spots(width: number, height: number, points: [number, number][]): Uint8Array {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let v = 0;
      for (const [ex, ey] of points) {
        // pixel (x, y) covers [x, x+1): its centre is x + 0.5
        const r = Math.hypot(x + 0.5 - ex, y + 0.5 - ey);
        v = Math.max(v, 255 * Math.max(0, 1 - r / 3));
      }
      data[(y * width + x) * 3] = Math.round(v);
    }
  }
  return data;
}

function centroid(crop: Uint8Array, from: number, to: number): [number, number] {
  let sw = 0;
  let sx = 0;
  let sy = 0;
  for (let j = 0; j < 320; j++) {
    for (let i = from; i < to; i++) {
      const w = crop[(j * 320 + i) * 3];
      sw += w;
      sx += w * (i + 0.5);
      sy += w * (j + 0.5);
    }
  }
  return [sx / sw, sy / sw];
}

t.test('eyes land at (133.3, 133.3) and (186.7, 133.3), whatever the tilt', async (t) => {
  const cases: [[number, number], [number, number]][] = [
    [[80, 100], [124, 100]],
    [[80.5, 90.25], [120.5, 110.75]], // tilted down to the right
    [[70, 130], [125, 95]], // tilted up
  ];
  for (const eyes of cases) {
    const data = spots(220, 220, eyes);
    const crop = eyeCrop320({ data, width: 220, height: 220 }, eyes);
    const left = centroid(crop, 0, 160);
    const right = centroid(crop, 160, 320);
    t.ok(Math.abs(left[0] - 400 / 3) < 0.3 && Math.abs(left[1] - 400 / 3) < 0.3, `left eye at ${left.map((v) => v.toFixed(2))}`);
    t.ok(Math.abs(right[0] - 560 / 3) < 0.3 && Math.abs(right[1] - 400 / 3) < 0.3, `right eye at ${right.map((v) => v.toFixed(2))}`);
  }
});

t.test('the face frame: chin side is below the eyes in the crop', async (t) => {
  // A mark 1.5 d along v (towards the chin) from the eye midpoint lands 1.5/6*320 = 80 px
  // below the crop's eye line, at the centre column.
  const e0: [number, number] = [90, 100];
  const e1: [number, number] = [110, 100];
  const crop = eyeCrop320({ data: spots(200, 200, [[100, 130]]), width: 200, height: 200 }, [e0, e1]);
  const [x, y] = centroid(crop, 0, 320);
  t.ok(Math.abs(x - 160) < 0.3 && Math.abs(y - (400 / 3 + 80)) < 0.3, `mark at ${x.toFixed(2)}, ${y.toFixed(2)}`);
});

/** The contract's geometry written plainly, one call per pixel: what the optimised loop in
 * eyeCrop320 must reproduce byte for byte. */
function plainCrop(data: ArrayLike<number>, w: number, h: number, eyes: [[number, number], [number, number]]): Uint8Array {
  const ch = data.length / (w * h);
  const out = new Uint8Array(320 * 320 * 3);
  const at = (x: number, y: number, c: number) => (x >= 0 && x < w && y >= 0 && y < h ? data[(y * w + x) * ch + c]! : 0);
  for (let j = 0; j < 320; j++) {
    for (let i = 0; i < 320; i++) {
      const [x, y] = cropSamplePoint(eyes, i, j);
      const xf = Math.floor(x);
      const yf = Math.floor(y);
      const fx = x - xf;
      const fy = y - yf;
      for (let c = 0; c < 3; c++) {
        let v = 0;
        if (xf >= 0 && xf < w && yf >= 0 && yf < h) v += (1 - fx) * (1 - fy) * at(xf, yf, c);
        if (xf + 1 >= 0 && xf + 1 < w && yf >= 0 && yf < h) v += fx * (1 - fy) * at(xf + 1, yf, c);
        if (xf >= 0 && xf < w && yf + 1 >= 0 && yf + 1 < h) v += (1 - fx) * fy * at(xf, yf + 1, c);
        if (xf + 1 >= 0 && xf + 1 < w && yf + 1 >= 0 && yf + 1 < h) v += fx * fy * at(xf + 1, yf + 1, c);
        out[(j * 320 + i) * 3 + c] = Math.min(255, Math.max(0, Math.round(v)));
      }
    }
  }
  return out;
}

t.test('the optimised crop equals the plain formula on random images, eye lines and borders', async (t) => {
  let seed = 12345;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const cases: [number, number, number, [[number, number], [number, number]]][] = [
    [200, 150, 3, [[80, 70], [120, 72]]],
    [200, 150, 4, [[5, 5], [60, 20]]], // crop runs off the top left: black borders
    [97, 61, 3, [[40.25, 30.75], [41.5, 10.125]]], // steep, fractional, mostly outside
    [64, 64, 4, [[63, 63], [64, 64]]], // on the last pixel and the far edge
  ];
  for (let k = 0; k < 4; k++) cases.push([120 + k * 17, 90 + k * 11, 3 + (k % 2), [[rnd() * 100, rnd() * 80], [20 + rnd() * 100, rnd() * 90]]]);
  for (const [w, h, ch, eyes] of cases) {
    const data = ch === 4 ? new Uint8ClampedArray(w * h * 4) : new Uint8Array(w * h * 3);
    for (let i = 0; i < data.length; i++) data[i] = Math.floor(rnd() * 256);
    const fast = eyeCrop320({ data, width: w, height: h }, eyes);
    const plain = plainCrop(data, w, h, eyes);
    t.ok(Buffer.from(fast).equals(Buffer.from(plain)), `${w}x${h}x${ch} eyes ${JSON.stringify(eyes)}`);
  }
});
