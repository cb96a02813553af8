// Scores computed directly with onnxruntime-node, with the preprocessing of each model
// set's contract written out by hand here (not through src/inference/preprocess.ts), so
// a served score that matches proves both the numerics and the manifest path.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';

const MODELS = join(import.meta.dirname, '../../models');
const sessions = new Map<string, Promise<ort.InferenceSession>>();

function session(rel: string): Promise<ort.InferenceSession> {
  let s = sessions.get(rel);
  if (!s) {
    s = ort.InferenceSession.create(readFileSync(join(MODELS, rel)), { intraOpNumThreads: 1 });
    sessions.set(rel, s);
  }
  return s;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

/** Block mean over `factor` x `factor` of the centred `side` square; planar RGB 0..255. */
function blockMean(px: Uint8Array, side: number, factor: number): Float32Array[] {
  const size = side / factor;
  const origin = (320 - side) / 2;
  const planes = [0, 1, 2].map(() => new Float32Array(size * size));
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      for (let c = 0; c < 3; c++) {
        let sum = 0;
        for (let dy = 0; dy < factor; dy++) {
          for (let dx = 0; dx < factor; dx++) sum += px[((origin + y * factor + dy) * 320 + origin + x * factor + dx) * 3 + c];
        }
        planes[c][y * size + x] = sum / (factor * factor);
      }
    }
  }
  return planes;
}

// raw_v1: frames 0.8 of the crop (256 px) block-averaged to 128; colour 0.6 (192 px) to 64;
// RGB, (v / 255 - 0.5) / 0.25, NCHW.
const rawNorm = (planes: Float32Array[]) => planes.map((p) => p.map((v) => (v / 255 - 0.5) / 0.25));

async function rawFrame(px: Uint8Array): Promise<{ logit: number; features: Float32Array }> {
  const planes = rawNorm(blockMean(px, 256, 2));
  const data = new Float32Array(3 * 128 * 128);
  planes.forEach((p, c) => data.set(p, c * 128 * 128));
  const s = await session('raw_v1/rgb_frame.onnx');
  const out = await s.run({ image: new ort.Tensor('float32', data, [1, 3, 128, 128]) });
  return { logit: (out.logit.data as Float32Array)[0], features: out.features.data as Float32Array };
}

export async function rawSingle(px: Uint8Array): Promise<number> {
  return sigmoid((await rawFrame(px)).logit);
}

export async function rawFrameScores(frames: Uint8Array[]): Promise<number[]> {
  return Promise.all(frames.map(rawSingle));
}

/** Sequence score of raw_v1 over the given final-window frames: sigmoid(temporal_logit). */
export async function rawSequence(window: Uint8Array[]): Promise<{ score: number; temporal_logit: number }> {
  const feats = await Promise.all(window.map(async (px) => (await rawFrame(px)).features));
  const data = new Float32Array(window.length * 16);
  feats.forEach((f, i) => data.set(f, i * 16));
  const s = await session('raw_v1/temporal_head.onnx');
  const out = await s.run({ features: new ort.Tensor('float32', data, [1, window.length, 16]) });
  const logit = (out.temporal_logit.data as Float32Array)[0];
  return { score: sigmoid(logit), temporal_logit: logit };
}

export async function rawColor(phases: Uint8Array[]): Promise<{ score: number; difference: number; appearance: number; fused: number }> {
  const frames = phases.map((px) => rawNorm(blockMean(px, 192, 3)));
  const n = 64 * 64;
  const diff = new Float32Array(9 * n);
  for (let k = 1; k < 4; k++) {
    for (let c = 0; c < 3; c++) {
      for (let i = 0; i < n; i++) diff[(3 * (k - 1) + c) * n + i] = frames[k][c][i] - frames[k - 1][c][i];
    }
  }
  const app = new Float32Array(12 * n);
  frames.forEach((f, k) => f.forEach((p, c) => app.set(p, (3 * k + c) * n)));
  const d = await (await session('raw_v1/color_difference.onnx')).run({ input: new ort.Tensor('float32', diff, [1, 9, 64, 64]) });
  const a = await (await session('raw_v1/color_appearance.onnx')).run({ input: new ort.Tensor('float32', app, [1, 12, 64, 64]) });
  const difference = (d.logit.data as Float32Array)[0];
  const appearance = (a.logit.data as Float32Array)[0];
  const fused = 0.5 * difference + 0.5 * appearance;
  return { score: sigmoid(fused), difference, appearance, fused };
}

/** bgr80_ensemble_v1: the centred 80x80 of the crop as is, BGR, 0..255, NCHW, batch 1;
 * mean over both graphs of softmax class 1. */
export async function bgr80Single(px: Uint8Array): Promise<number> {
  const data = new Float32Array(3 * 80 * 80);
  for (let y = 0; y < 80; y++) {
    for (let x = 0; x < 80; x++) {
      const p = ((120 + y) * 320 + 120 + x) * 3;
      data[0 * 6400 + y * 80 + x] = px[p + 2];
      data[1 * 6400 + y * 80 + x] = px[p + 1];
      data[2 * 6400 + y * 80 + x] = px[p];
    }
  }
  let sum = 0;
  for (const file of ['bgr80_a.onnx', 'bgr80_b.onnx']) {
    const s = await session(`bgr80_ensemble_v1/${file}`);
    const out = await s.run({ input: new ort.Tensor('float32', data, [1, 3, 80, 80]) });
    sum += (out.probs.data as Float32Array)[1];
  }
  return sum / 2;
}
