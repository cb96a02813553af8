// Turns the client's 320x320 RGB crop into a graph's input tensor, entirely from the
// manifest: centred sub-square, resize, channel order, normalisation, layout, dtype.
import { CROP_SIZE, RGB8_BYTES } from '../packets/types.ts';
import type { ImageGraphSpec } from './manifest.ts';

export type Plan = Pick<
  ImageGraphSpec,
  'crop_fraction' | 'size' | 'channel_order' | 'scale' | 'mean' | 'std' | 'layout' | 'dtype'
>;

/** Centred sub-square of the crop resampled to size x size, RGB HWC, values 0..255.
 * When the sub-square is a whole multiple of the target size, each output pixel is the
 * exact mean of its source block (no aliasing, and easy to reproduce elsewhere);
 * otherwise bilinear with half-pixel centres (OpenCV INTER_LINEAR convention). */
export function resample(pixels: Uint8Array, fraction: number, size: number): Float32Array {
  const side = CROP_SIZE * fraction;
  const origin = (CROP_SIZE - side) / 2;
  const out = new Float32Array(size * size * 3);
  const factor = side / size;
  if (Number.isInteger(side) && Number.isInteger(origin) && Number.isInteger(factor)) {
    const inv = 1 / (factor * factor);
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        let r = 0;
        let g = 0;
        let b = 0;
        for (let dy = 0; dy < factor; dy++) {
          let p = ((origin + y * factor + dy) * CROP_SIZE + origin + x * factor) * 3;
          for (let dx = 0; dx < factor; dx++, p += 3) {
            r += pixels[p];
            g += pixels[p + 1];
            b += pixels[p + 2];
          }
        }
        const o = (y * size + x) * 3;
        out[o] = r * inv;
        out[o + 1] = g * inv;
        out[o + 2] = b * inv;
      }
    }
    return out;
  }
  const max = CROP_SIZE - 1;
  for (let y = 0; y < size; y++) {
    const sy = Math.min(max, Math.max(0, origin + (y + 0.5) * factor - 0.5));
    const y0 = Math.floor(sy);
    const y1 = Math.min(max, y0 + 1);
    const fy = sy - y0;
    for (let x = 0; x < size; x++) {
      const sx = Math.min(max, Math.max(0, origin + (x + 0.5) * factor - 0.5));
      const x0 = Math.floor(sx);
      const x1 = Math.min(max, x0 + 1);
      const fx = sx - x0;
      const p00 = (y0 * CROP_SIZE + x0) * 3;
      const p01 = (y0 * CROP_SIZE + x1) * 3;
      const p10 = (y1 * CROP_SIZE + x0) * 3;
      const p11 = (y1 * CROP_SIZE + x1) * 3;
      const o = (y * size + x) * 3;
      for (let c = 0; c < 3; c++) {
        const top = pixels[p00 + c] + (pixels[p01 + c] - pixels[p00 + c]) * fx;
        const bottom = pixels[p10 + c] + (pixels[p11 + c] - pixels[p10 + c]) * fx;
        out[o + c] = top + (bottom - top) * fy;
      }
    }
  }
  return out;
}

/** Normalised model-order channels of one image, planar [3][size*size]:
 * value = (pixel * scale - mean[c]) / std[c], c counted in the model's channel order. */
export function normalise(plan: Plan, hwc: Float32Array): Float32Array[] {
  const n = plan.size * plan.size;
  const planes = [new Float32Array(n), new Float32Array(n), new Float32Array(n)];
  const src = plan.channel_order === 'RGB' ? [0, 1, 2] : [2, 1, 0];
  for (let c = 0; c < 3; c++) {
    const plane = planes[c];
    const s = src[c];
    const mul = plan.scale / plan.std[c];
    const add = -plan.mean[c] / plan.std[c];
    for (let i = 0; i < n; i++) plane[i] = hwc[i * 3 + s] * mul + add;
  }
  return planes;
}

export type InputArray = Float32Array | Uint8Array;

export function allocate(plan: Plan, batch: number, channels: number): InputArray {
  const len = batch * channels * plan.size * plan.size;
  return plan.dtype === 'uint8' ? new Uint8Array(len) : new Float32Array(len);
}

export function dims(plan: Plan, batch: number, channels: number): number[] {
  return plan.layout === 'NCHW' ? [batch, channels, plan.size, plan.size] : [batch, plan.size, plan.size, channels];
}

/** Writes planes as channels [channelOffset, channelOffset + planes.length) of batch
 * item `item` in a tensor with `channels` channels. uint8 inputs are rounded and clamped. */
export function writePlanes(
  plan: Plan,
  dst: InputArray,
  planes: Float32Array[],
  item: number,
  channelOffset: number,
  channels: number,
): void {
  const n = plan.size * plan.size;
  const base = item * channels * n;
  const u8 = plan.dtype === 'uint8';
  for (let k = 0; k < planes.length; k++) {
    const plane = planes[k];
    const c = channelOffset + k;
    if (plan.layout === 'NCHW') {
      const o = base + c * n;
      if (u8) for (let i = 0; i < n; i++) dst[o + i] = Math.min(255, Math.max(0, Math.round(plane[i])));
      else (dst as Float32Array).set(plane, o);
    } else {
      for (let i = 0; i < n; i++) {
        const v = plane[i];
        dst[base + i * channels + c] = u8 ? Math.min(255, Math.max(0, Math.round(v))) : v;
      }
    }
  }
}

/** One frame's normalised planes, ready for writePlanes. */
export function prepareFrame(plan: Plan, pixels: Uint8Array): Float32Array[] {
  if (pixels.length !== RGB8_BYTES) throw new Error(`a crop must be ${RGB8_BYTES} bytes of 320x320 RGB, got ${pixels.length}`);
  return normalise(plan, resample(pixels, plan.crop_fraction, plan.size));
}
