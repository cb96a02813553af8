// raw_v1: the shipped default. Untrained (fixed-seed random) weights with the real
// architectures and I/O contracts, so the service path is exercised end to end.
import { GraphBuilder } from './graph.ts';
import { conv, dense, pool, separable, type Ctx } from './layers.ts';
import { prng } from './prng.ts';

export const FRAME_SIZE = 128;
/** The frame CNN sees the centred 0.8 of the crop (256 px, about 4.8 eye distances). */
export const FRAME_CROP = 0.8;
export const FEATURES = 16;
export const COLOR_SIZE = 64;

/** Untrained ReLU nets put nearly every input at one constant logit (about +3.8 for the
 * frame CNN), so every verdict would be the same. These offsets, read off the untrained
 * graphs on the test crops, move typical inputs near logit 0 so both verdicts occur.
 * They carry no meaning beyond that. */
const LOGIT_CENTRES = { frame: -3.9, temporal: 3.8, color_difference: 1.6, color_appearance: 1.8 } as const;

/** Per-frame RGB CNN, dynamic batch. Downsamples by 2 in the stem, MiniFASNet-like
 * separable blocks after that (about 36 M multiply-adds, MiniFASNetV2's order). Outputs
 * a live logit and a feature vector for the temporal head. */
export function rgbFrame(): Uint8Array {
  const g = new GraphBuilder('rgb_frame');
  const ctx: Ctx = { g, rand: prng(0x5eed_0001) };
  let x = g.input('image', ['batch', 3, FRAME_SIZE, FRAME_SIZE]);
  x = conv(ctx, x, 3, 32, { stride: 2 }); // 64
  x = separable(ctx, x, 32, 48, 1); // 64
  x = separable(ctx, x, 48, 64, 2); // 32
  x = separable(ctx, x, 64, 64, 1); // 32
  x = separable(ctx, x, 64, 128, 2); // 16
  x = separable(ctx, x, 128, 128, 1); // 16
  x = separable(ctx, x, 128, 128, 1); // 16
  x = separable(ctx, x, 128, 256, 2); // 8
  x = separable(ctx, x, 256, 256, 1); // 8
  x = pool(g, x);
  const feats = dense(ctx, x, 256, FEATURES, { relu: true, out: 'features' });
  dense(ctx, feats, FEATURES, 1, { gain: 4, bias: LOGIT_CENTRES.frame, out: 'logit' });
  g.output('features', ['batch', FEATURES]);
  g.output('logit', ['batch', 1]);
  return g.encode('raw_v1 per-frame RGB CNN (untrained, fixed-seed weights)');
}

/** Temporal head over the final window's per-frame features [1, T, F]: mean and max
 * over time, then a small MLP to one logit. Any T from 1 to 20. */
export function temporalHead(): Uint8Array {
  const g = new GraphBuilder('temporal_head');
  const ctx: Ctx = { g, rand: prng(0x5eed_0002) };
  const x = g.input('features', [1, 'frames', FEATURES]);
  const mean = g.node('ReduceMean', [x], { axes: [1], keepdims: 0 });
  const max = g.node('ReduceMax', [x], { axes: [1], keepdims: 0 });
  const cat = g.node('Concat', [mean, max], { axis: 1 });
  const h = dense(ctx, cat, 2 * FEATURES, 8, { relu: true });
  dense(ctx, h, 8, 1, { gain: 4, bias: LOGIT_CENTRES.temporal, out: 'temporal_logit' });
  g.output('temporal_logit', [1, 1]);
  return g.encode('raw_v1 temporal head (untrained, fixed-seed weights)');
}

/** A colour branch: stacked images [1, C, 64, 64] to one logit. The difference branch
 * takes the three adjacent-phase differences (9 channels), the appearance branch the
 * four phase frames (12 channels). */
export function colorBranch(name: 'color_difference' | 'color_appearance', channels: number, seed: number): Uint8Array {
  const g = new GraphBuilder(name);
  const ctx: Ctx = { g, rand: prng(seed) };
  let x = g.input('input', [1, channels, COLOR_SIZE, COLOR_SIZE]);
  x = conv(ctx, x, channels, 24, { stride: 2 }); // 32
  x = conv(ctx, x, 24, 32, { stride: 2 }); // 16
  x = conv(ctx, x, 32, 48, { stride: 2 }); // 8
  x = pool(g, x);
  dense(ctx, x, 48, 1, { gain: 4, bias: LOGIT_CENTRES[name], out: 'logit' });
  g.output('logit', [1, 1]);
  return g.encode(`raw_v1 colour ${name} branch (untrained, fixed-seed weights)`);
}
