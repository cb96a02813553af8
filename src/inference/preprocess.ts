// Turns the client's 320x320 RGB crop into a graph's input tensor, entirely from the
// manifest: centred sub-square, resize, channel order, normalisation, layout, dtype.
//
// One pass per frame: every output pixel is resampled from the uint8 crop, normalised and
// stored straight into its place in the (reused) input tensor. No full-size float copy of
// the crop is ever made and nothing is allocated per frame: this runs for every frame the
// service scores, and the intermediate HWC float image plus three planes it replaces cost
// more than the model on small graphs.
import type { ImageGraphSpec } from './manifest.ts';

export type ResizeKind = 'area' | 'bilinear';

export type Plan = Pick<
  ImageGraphSpec,
  'crop_fraction' | 'size' | 'channel_order' | 'scale' | 'mean' | 'std' | 'layout' | 'dtype'
> & { resize?: ResizeKind };

export type InputArray = Float32Array | Uint8Array;

// Local copies, not imports: under tsx an imported constant read in a hot loop costs a
// getter call per read (packets/types.ts holds the same values for the wire contract).
const CROP = 320;
const ROW = CROP * 3;
const CROP_BYTES = CROP * ROW;

/**
 * Source taps of one axis: output coordinate i reads source pixels index[i*k + t] with
 * weights weight[i*k + t], t < k. The crop is square and the sub-square centred, so one
 * table serves both axes.
 */
interface Taps {
  k: number;
  /** taps actually used by output i (the rest of its k slots are empty) */
  count: Int32Array;
  index: Int32Array;
  weight: Float64Array;
}

/** bilinear: OpenCV INTER_LINEAR geometry (half-pixel centres, edge clamp), computed in
 * floating point; the source is the sub-square [origin, origin + side). */
function bilinearTaps(origin: number, side: number, size: number): Taps {
  const factor = side / size;
  const lo = origin;
  const hi = origin + side - 1;
  const index = new Int32Array(size * 2);
  const weight = new Float64Array(size * 2);
  for (let i = 0; i < size; i++) {
    const s = Math.min(hi, Math.max(lo, origin + (i + 0.5) * factor - 0.5));
    const i0 = Math.floor(s);
    const i1 = Math.min(Math.floor(hi), i0 + 1);
    const f = s - i0;
    index[i * 2] = i0;
    index[i * 2 + 1] = i1;
    weight[i * 2] = 1 - f;
    weight[i * 2 + 1] = f;
  }
  return { k: 2, count: new Int32Array(size).fill(2), index, weight };
}

/** area: output pixel i is the mean of the source interval [origin + i*f, origin + (i+1)*f),
 * partial pixels weighted by the part covered (OpenCV INTER_AREA when shrinking). An
 * enlargement has no area to average, so it samples bilinearly, as OpenCV does. */
function areaTaps(origin: number, side: number, size: number): Taps {
  const factor = side / size;
  if (factor < 1) return bilinearTaps(origin, side, size);
  const k = Math.ceil(factor) + 1;
  const index = new Int32Array(size * k);
  const weight = new Float64Array(size * k);
  const count = new Int32Array(size);
  for (let i = 0; i < size; i++) {
    const a = origin + i * factor;
    const b = a + factor;
    let t = 0;
    for (let p = Math.floor(a); p < b && t < k; p++) {
      const w = (Math.min(b, p + 1) - Math.max(a, p)) / factor;
      if (w <= 0) continue;
      index[i * k + t] = Math.min(CROP - 1, p);
      weight[i * k + t] = w;
      t++;
    }
    count[i] = t;
    for (; t < k; t++) index[i * k + t] = index[i * k];
  }
  return { k, count, index, weight };
}

/**
 * A graph's preprocessing, compiled once from its plan. `write` fills one batch item of
 * an input tensor; `planes` fills a float32 [3][size*size] scratch in model channel order
 * (the colour difference branch subtracts two of them).
 */
export class FramePreparer {
  readonly size: number;
  readonly pixelsPerPlane: number;
  readonly resize: ResizeKind;
  private readonly bgr: boolean;
  private readonly mul: [number, number, number];
  private readonly add: [number, number, number];
  /** integer block average (side, origin and factor whole numbers): the fast path */
  private readonly block: { origin: number; factor: number; inv: number } | null;
  private readonly taps: Taps;

  constructor(readonly plan: Plan) {
    this.size = plan.size;
    this.pixelsPerPlane = plan.size * plan.size;
    this.resize = plan.resize ?? 'area';
    this.bgr = plan.channel_order === 'BGR';
    this.mul = [0, 1, 2].map((c) => plan.scale / plan.std[c]) as [number, number, number];
    this.add = [0, 1, 2].map((c) => -plan.mean[c] / plan.std[c]) as [number, number, number];
    const side = CROP * plan.crop_fraction;
    const origin = (CROP - side) / 2;
    const factor = side / plan.size;
    this.block = this.resize === 'area' && Number.isInteger(side) && Number.isInteger(origin) && Number.isInteger(factor)
      // `| 0`: small integers, not doubles that happen to be whole, so the index
      // arithmetic in the loop stays integer (a double index costs about 2.5x here)
      ? { origin: origin | 0, factor: factor | 0, inv: 1 / (factor * factor) }
      : null;
    this.taps = this.resize === 'area' ? areaTaps(origin, side, plan.size) : bilinearTaps(origin, side, plan.size);
  }

  /** Writes the crop's three normalised channels as channels [channelOffset, +3) of batch
   * item `item` of `dst`, a tensor of `channels` channels in the plan's layout and dtype.
   * uint8 inputs are rounded and clamped. */
  write(pixels: Uint8Array, dst: InputArray, item: number, channelOffset: number, channels: number): void {
    checkCrop(pixels);
    const n = this.pixelsPerPlane;
    const base = item * channels * n;
    if (this.plan.layout === 'NCHW') this.run(pixels, dst, base + channelOffset * n, n, 1, dst instanceof Uint8Array);
    else this.run(pixels, dst, base + channelOffset, 1, channels, dst instanceof Uint8Array);
  }

  /** Normalised float32 planes [3][size*size] in model channel order, into `out`. */
  planes(pixels: Uint8Array, out: Float32Array): void {
    checkCrop(pixels);
    if (out.length !== 3 * this.pixelsPerPlane) throw new Error(`planes need ${3 * this.pixelsPerPlane} floats, got ${out.length}`);
    this.run(pixels, out, 0, this.pixelsPerPlane, 1, false);
  }

  /**
   * The one pass. Element (channel c, pixel p) of the output lives at
   * base + c * cs + p * ps. Rounding follows the former three-stage path exactly (resampled
   * value to float32, normalised value to float32, then uint8), so scores did not move.
   * One function per (resize path, dtype): each sees one array type, so V8 keeps its
   * element stores monomorphic (about 2x on this loop).
   */
  private run(px: Uint8Array, dst: InputArray, base: number, cs: number, ps: number, u8: boolean): void {
    const k: Kernel = { size: this.size, bgr: this.bgr, mul: this.mul, add: this.add, base, cs, ps };
    const block = this.block;
    if (block) {
      if (u8) blockU8(px, dst as Uint8Array, k, block.origin, block.factor, block.inv);
      else blockF32(px, dst as Float32Array, k, block.origin, block.factor, block.inv);
    } else if (u8) {
      tapsU8(px, dst as Uint8Array, k, this.taps);
    } else if (this.taps.k === 2) {
      twoTapsF32(px, dst as Float32Array, k, this.taps);
    } else {
      tapsF32(px, dst as Float32Array, k, this.taps);
    }
  }
}

interface Kernel {
  size: number;
  bgr: boolean;
  mul: readonly [number, number, number];
  add: readonly [number, number, number];
  base: number;
  cs: number;
  ps: number;
}

const u8of = (v: number) => (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v));

function blockF32(px: Uint8Array, dst: Float32Array, k: Kernel, origin: number, factor: number, inv: number): void {
  const { size, bgr, base, ps } = k;
  const [m0, m1, m2] = k.mul;
  const [a0, a1, a2] = k.add;
  const o1 = k.cs;
  const o2 = 2 * k.cs;
  const fround = Math.fround;
  let p = 0;
  for (let y = 0; y < size; y++) {
    const rowStart = (origin + y * factor) * ROW + origin * 3;
    for (let x = 0; x < size; x++, p++) {
      let r = 0;
      let g = 0;
      let b = 0;
      let q = rowStart + x * factor * 3;
      for (let dy = 0; dy < factor; dy++, q += ROW) {
        let s = q;
        for (let dx = 0; dx < factor; dx++, s += 3) {
          r += px[s];
          g += px[s + 1];
          b += px[s + 2];
        }
      }
      const fr = fround(r * inv);
      const fb = fround(b * inv);
      const o = base + p * ps;
      dst[o] = (bgr ? fb : fr) * m0 + a0;
      dst[o + o1] = fround(g * inv) * m1 + a1;
      dst[o + o2] = (bgr ? fr : fb) * m2 + a2;
    }
  }
}

function blockU8(px: Uint8Array, dst: Uint8Array, k: Kernel, origin: number, factor: number, inv: number): void {
  const { size, bgr, base, ps } = k;
  const [m0, m1, m2] = k.mul;
  const [a0, a1, a2] = k.add;
  const o1 = k.cs;
  const o2 = 2 * k.cs;
  const fround = Math.fround;
  let p = 0;
  for (let y = 0; y < size; y++) {
    const rowStart = (origin + y * factor) * ROW + origin * 3;
    for (let x = 0; x < size; x++, p++) {
      let r = 0;
      let g = 0;
      let b = 0;
      let q = rowStart + x * factor * 3;
      for (let dy = 0; dy < factor; dy++, q += ROW) {
        let s = q;
        for (let dx = 0; dx < factor; dx++, s += 3) {
          r += px[s];
          g += px[s + 1];
          b += px[s + 2];
        }
      }
      const fr = fround(r * inv);
      const fb = fround(b * inv);
      const o = base + p * ps;
      dst[o] = u8of(fround((bgr ? fb : fr) * m0 + a0));
      dst[o + o1] = u8of(fround(fround(g * inv) * m1 + a1));
      dst[o + o2] = u8of(fround((bgr ? fr : fb) * m2 + a2));
    }
  }
}

function tapsF32(px: Uint8Array, dst: Float32Array, k: Kernel, taps: Taps): void {
  const { size, bgr, base, ps } = k;
  const [m0, m1, m2] = k.mul;
  const [a0, a1, a2] = k.add;
  const o1 = k.cs;
  const o2 = 2 * k.cs;
  const fround = Math.fround;
  const { k: n, count, index, weight } = taps;
  let p = 0;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++, p++) {
      let r = 0;
      let g = 0;
      let b = 0;
      const cy = count[y];
      const cx = count[x];
      for (let ty = 0; ty < cy; ty++) {
        const wy = weight[y * n + ty];
        const row = index[y * n + ty] * ROW;
        for (let tx = 0; tx < cx; tx++) {
          const w = wy * weight[x * n + tx];
          const s = row + index[x * n + tx] * 3;
          r += w * px[s];
          g += w * px[s + 1];
          b += w * px[s + 2];
        }
      }
      const fr = fround(r);
      const fb = fround(b);
      const o = base + p * ps;
      dst[o] = (bgr ? fb : fr) * m0 + a0;
      dst[o + o1] = fround(g) * m1 + a1;
      dst[o + o2] = (bgr ? fr : fb) * m2 + a2;
    }
  }
}

/** Bilinear (and area when enlarging) into float32, the common case: two taps per axis
 * unrolled, no inner loops. */
function twoTapsF32(px: Uint8Array, dst: Float32Array, k: Kernel, taps: Taps): void {
  const { size, bgr, base, ps } = k;
  const [m0, m1, m2] = k.mul;
  const [a0, a1, a2] = k.add;
  const o1 = k.cs;
  const o2 = 2 * k.cs;
  const fround = Math.fround;
  const { index, weight } = taps;
  let p = 0;
  for (let y = 0; y < size; y++) {
    const r0 = index[2 * y] * ROW;
    const r1 = index[2 * y + 1] * ROW;
    const wy0 = weight[2 * y];
    const wy1 = weight[2 * y + 1];
    for (let x = 0; x < size; x++, p++) {
      const c0 = index[2 * x] * 3;
      const c1 = index[2 * x + 1] * 3;
      const w00 = wy0 * weight[2 * x];
      const w01 = wy0 * weight[2 * x + 1];
      const w10 = wy1 * weight[2 * x];
      const w11 = wy1 * weight[2 * x + 1];
      const s00 = r0 + c0;
      const s01 = r0 + c1;
      const s10 = r1 + c0;
      const s11 = r1 + c1;
      const fr = fround(w00 * px[s00] + w01 * px[s01] + w10 * px[s10] + w11 * px[s11]);
      const g = fround(w00 * px[s00 + 1] + w01 * px[s01 + 1] + w10 * px[s10 + 1] + w11 * px[s11 + 1]);
      const fb = fround(w00 * px[s00 + 2] + w01 * px[s01 + 2] + w10 * px[s10 + 2] + w11 * px[s11 + 2]);
      const o = base + p * ps;
      dst[o] = (bgr ? fb : fr) * m0 + a0;
      dst[o + o1] = g * m1 + a1;
      dst[o + o2] = (bgr ? fr : fb) * m2 + a2;
    }
  }
}

function tapsU8(px: Uint8Array, dst: Uint8Array, k: Kernel, taps: Taps): void {
  const { size, bgr, base, ps } = k;
  const [m0, m1, m2] = k.mul;
  const [a0, a1, a2] = k.add;
  const o1 = k.cs;
  const o2 = 2 * k.cs;
  const fround = Math.fround;
  const { k: n, count, index, weight } = taps;
  let p = 0;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++, p++) {
      let r = 0;
      let g = 0;
      let b = 0;
      const cy = count[y];
      const cx = count[x];
      for (let ty = 0; ty < cy; ty++) {
        const wy = weight[y * n + ty];
        const row = index[y * n + ty] * ROW;
        for (let tx = 0; tx < cx; tx++) {
          const w = wy * weight[x * n + tx];
          const s = row + index[x * n + tx] * 3;
          r += w * px[s];
          g += w * px[s + 1];
          b += w * px[s + 2];
        }
      }
      const fr = fround(r);
      const fb = fround(b);
      const o = base + p * ps;
      dst[o] = u8of(fround((bgr ? fb : fr) * m0 + a0));
      dst[o + o1] = u8of(fround(fround(g) * m1 + a1));
      dst[o + o2] = u8of(fround((bgr ? fr : fb) * m2 + a2));
    }
  }
}

function checkCrop(pixels: Uint8Array): void {
  if (pixels.length !== CROP_BYTES) throw new Error(`a crop must be ${CROP_BYTES} bytes of 320x320 RGB, got ${pixels.length}`);
}

export function allocate(plan: Plan, batch: number, channels: number): InputArray {
  const len = batch * channels * plan.size * plan.size;
  return plan.dtype === 'uint8' ? new Uint8Array(len) : new Float32Array(len);
}

export function dims(plan: Plan, batch: number, channels: number): number[] {
  return plan.layout === 'NCHW' ? [batch, channels, plan.size, plan.size] : [batch, plan.size, plan.size, channels];
}

/**
 * A graph's input tensor of up to `capacity` items, allocated once and reused for every
 * run (the runtime copies it into its own memory before run() resolves). `view(n)` is the
 * first n items, with views made once per size.
 */
export class InputBuffer {
  readonly data: InputArray;
  private readonly views: InputArray[] = [];
  private readonly shapes: number[][] = [];

  constructor(plan: Plan, readonly capacity: number, readonly channels: number) {
    this.data = allocate(plan, capacity, channels);
    const per = this.data.length / capacity;
    for (let n = 0; n <= capacity; n++) {
      this.views.push(this.data.subarray(0, n * per));
      this.shapes.push(dims(plan, n, channels));
    }
  }

  view(n: number): InputArray {
    return this.views[n];
  }

  dims(n: number): number[] {
    return this.shapes[n];
  }
}

// Kept for tests and tools that want a planar look at one frame.
/** One frame's normalised planes in model channel order, [3][size*size]. */
export function prepareFrame(plan: Plan, pixels: Uint8Array): Float32Array[] {
  const prep = new FramePreparer(plan);
  const out = new Float32Array(3 * prep.pixelsPerPlane);
  prep.planes(pixels, out);
  const n = prep.pixelsPerPlane;
  return [out.subarray(0, n), out.subarray(n, 2 * n), out.subarray(2 * n)];
}
