// Reference implementation of eye_crop_320_v1 (contract.md "Crop geometry of eye_crop_320_v1"):
// clients and models must agree on framing, so this follows the contract literally.

export interface SourceImage {
  /** row-major HWC pixels; RGB (3 bytes) or RGBA (4 bytes, alpha ignored, e.g. canvas ImageData) */
  data: Uint8Array | Uint8ClampedArray;
  width: number;
  height: number;
}

export type EyePair = readonly [readonly [number, number], readonly [number, number]];

const SIZE = 320;

/** Where the contract's geometry puts output pixel (i, j) in source coordinates, pixel centres
 * already shifted (the point to hand to bilinear sampling). Exposed for tests and for
 * mapping crop coordinates back to the source. */
export function cropSamplePoint(eyes: EyePair, i: number, j: number): [number, number] {
  const { cx, cy, ux, uy, vx, vy, side } = frame(eyes);
  const a = ((i + 0.5) / SIZE - 0.5) * side;
  const b = ((j + 0.5) / SIZE - 0.5) * side;
  return [cx + a * ux + b * vx - 0.5, cy + a * uy + b * vy - 0.5];
}

function frame(eyes: EyePair) {
  const [[x0, y0], [x1, y1]] = eyes;
  const d = Math.hypot(x1 - x0, y1 - y0);
  const theta = Math.atan2(y1 - y0, x1 - x0);
  const ux = Math.cos(theta);
  const uy = Math.sin(theta);
  const vx = -uy;
  const vy = ux;
  return {
    cx: (x0 + x1) / 2 + 0.5 * d * vx,
    cy: (y0 + y1) / 2 + 0.5 * d * vy,
    ux, uy, vx, vy,
    side: 6 * d,
  };
}

/** The 320x320 RGB crop (307200 bytes, HWC) of `src` for the eye points `eyes` (upright,
 * unmirrored source coordinates, sorted by x). Bilinear sampling; every neighbour outside the
 * source reads as black, so borders fade to black exactly as the contract prescribes. Values
 * are rounded to the nearest integer. */
export function eyeCrop320(src: SourceImage, eyes: EyePair): Uint8Array {
  const { data, width, height } = src;
  const channels = data.length / (width * height);
  if (channels !== 3 && channels !== 4) {
    throw new RangeError(`eyeCrop320: ${data.length} bytes is neither RGB nor RGBA for ${width}x${height}`);
  }
  const [[x0, y0], [x1, y1]] = eyes;
  if (![x0, y0, x1, y1].every(Number.isFinite) || (x0 === x1 && y0 === y1)) {
    throw new RangeError('eyeCrop320: eye points must be finite and distinct');
  }
  const { cx, cy, ux, uy, vx, vy, side } = frame(eyes);
  // one element type for the hot loop whatever the caller passed (canvas data is clamped)
  const px = data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.length);
  const out = new Uint8Array(SIZE * SIZE * 3);
  // The contract's formula per pixel, not an incremental walk, so that rounding ties land
  // where any other implementation of the same formula puts them: x = cx + a*ux + b*vx - 0.5
  // is evaluated in that order, with a*ux and a*uy taken once per column. The loop is written
  // out (no call per pixel, a branch-free path for samples inside the image) because a
  // capture client crops every frame: test/client/crop.test.ts holds it to the plain version.
  const aux = new Float64Array(SIZE);
  const auy = new Float64Array(SIZE);
  for (let i = 0; i < SIZE; i++) {
    const a = ((i + 0.5) / SIZE - 0.5) * side;
    aux[i] = a * ux;
    auy[i] = a * uy;
  }
  const rowStride = width * channels;
  for (let j = 0; j < SIZE; j++) {
    const b = ((j + 0.5) / SIZE - 0.5) * side;
    const bvx = b * vx;
    const bvy = b * vy;
    for (let i = 0; i < SIZE; i++) {
      const x = cx + aux[i]! + bvx - 0.5;
      const y = cy + auy[i]! + bvy - 0.5;
      const o = (j * SIZE + i) * 3;
      const xf = Math.floor(x);
      const yf = Math.floor(y);
      if (xf >= 0 && yf >= 0 && xf + 1 < width && yf + 1 < height) {
        const fx = x - xf;
        const fy = y - yf;
        const w00 = (1 - fx) * (1 - fy);
        const w10 = fx * (1 - fy);
        const w01 = (1 - fx) * fy;
        const w11 = fx * fy;
        const p00 = yf * rowStride + xf * channels;
        const p01 = p00 + rowStride;
        for (let c = 0; c < 3; c++) {
          const v = w00 * px[p00 + c]! + w10 * px[p00 + channels + c]! + w01 * px[p01 + c]! + w11 * px[p01 + channels + c]!;
          const r = Math.round(v);
          out[o + c] = r > 255 ? 255 : r;
        }
      } else {
        sampleBilinear(px, width, height, channels, x, y, out, o);
      }
    }
  }
  return out;
}

/** Bilinear sample at (x, y) where some neighbours may lie outside the source (black). */
function sampleBilinear(data: Uint8Array, w: number, h: number, channels: number,
  x: number, y: number, out: Uint8Array, o: number): void {
  const xf = Math.floor(x);
  const yf = Math.floor(y);
  const fx = x - xf;
  const fy = y - yf;
  const w00 = (1 - fx) * (1 - fy);
  const w10 = fx * (1 - fy);
  const w01 = (1 - fx) * fy;
  const w11 = fx * fy;
  const in0 = yf >= 0 && yf < h;
  const in1 = yf + 1 >= 0 && yf + 1 < h;
  const inx0 = xf >= 0 && xf < w;
  const inx1 = xf + 1 >= 0 && xf + 1 < w;
  const p00 = in0 && inx0 ? (yf * w + xf) * channels : -1;
  const p10 = in0 && inx1 ? (yf * w + xf + 1) * channels : -1;
  const p01 = in1 && inx0 ? ((yf + 1) * w + xf) * channels : -1;
  const p11 = in1 && inx1 ? ((yf + 1) * w + xf + 1) * channels : -1;
  for (let c = 0; c < 3; c++) {
    let v = 0;
    if (p00 >= 0) v += w00 * data[p00 + c];
    if (p10 >= 0) v += w10 * data[p10 + c];
    if (p01 >= 0) v += w01 * data[p01 + c];
    if (p11 >= 0) v += w11 * data[p11 + c];
    const r = Math.round(v);
    out[o + c] = r < 0 ? 0 : r > 255 ? 255 : r;
  }
}
