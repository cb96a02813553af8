// What a manifest says a graph returns, checked against what the graph actually returns.
// The schema alone let a wrong live_index (NaN scores, every verify a 500) and logits
// declared as softmax (clipped logits served as probabilities) pass as "ok"; both only show
// when the graph runs. So every graph runs here on a few fixed inputs when it is loaded (in
// each pool worker, and in `models check`): a failure keeps its module unready and the
// message, naming the graph and the field, is what /health/ready and the check print. A
// dynamic-batch graph must also score each crop alone as in a batch: `models check` alone
// compared that before, so a set it failed could still serve (issue 40).
// (graph-safety.ts has already looked at the file itself: no external data, no Loop.)
import { CROP_SIZE } from '../contract/index.ts';
import { MAX_BATCH, type GraphSpec, type ImageGraphSpec } from './manifest.ts';
import type { Feed, Session } from './runtime.ts';
import { seededCrop } from './seeded-crop.ts';

/** How far a softmax row may sum from 1 (float32 exports round; 1e-3 is far above that). */
export const SOFTMAX_SUM_TOLERANCE = 1e-3;
/** Probabilities a float32 graph computes may overshoot [0, 1] by rounding, never more. */
const PROBABILITY_SLACK = 1e-6;

export interface LoadedGraph {
  spec: GraphSpec;
  session: Session;
}

const PHASES = 4;
const CHANNELS: Record<ImageGraphSpec['role'], number> = { frame: 3, color_difference: 3 * (PHASES - 1), color_appearance: 3 * PHASES };

/**
 * Checks one raw score output of `batch` items against the manifest's `output_kind` and
 * `live_index`. Returns the problem in words, or null. Pure, so it is tested directly.
 */
export function outputProblem(spec: Pick<GraphSpec, 'output' | 'output_kind' | 'live_index'>, data: ArrayLike<number>, batch: number): string | null {
  const width = data.length / batch;
  const name = `output "${spec.output}"`;
  if (!Number.isInteger(width) || width < 1) return `${name} has ${data.length} values for a batch of ${batch}`;
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) return `${name} gave ${data[i]} on the check inputs (every value must be finite)`;
  }
  const kind = spec.output_kind;
  if (kind === 'logit' || kind === 'probability') {
    // The service reads the first value of each item; a wider output would be misread silently.
    if (width !== 1) return `${name} has ${width} values per item but output_kind "${kind}" means exactly one`;
    if (kind === 'probability') {
      for (let i = 0; i < data.length; i++) {
        if (data[i] < -PROBABILITY_SLACK || data[i] > 1 + PROBABILITY_SLACK) return `${name} gave ${data[i]}, outside [0, 1], but output_kind is "probability"`;
      }
    }
    return null;
  }
  const live = spec.live_index ?? 0;
  if (width < 2) return `${name} has ${width} value per item; output_kind "${kind}" needs at least two classes`;
  if (live >= width) return `live_index ${live} is out of range: ${name} has ${width} classes (0 to ${width - 1})`;
  // the reverse mistake: probabilities declared as logits pass every bound, and the service's
  // softmax over them squashes each score towards 1/k (a live 0.95 of two classes served as
  // 0.56). Every check item's row a distribution (in [0, 1], summing to 1) is what a softmax
  // gives and logits of these four crops never do; `models import` asks the same question.
  if (kind === 'logits' && rowsAreDistributions(data, batch, width)) {
    return `${name} gives rows of probabilities (each value in [0, 1], each row summing to 1) on every check input, but output_kind is "logits" (is it "softmax"?)`;
  }
  if (kind === 'softmax') {
    for (let b = 0; b < batch; b++) {
      let sum = 0;
      for (let k = 0; k < width; k++) {
        const v = data[b * width + k];
        if (v < -PROBABILITY_SLACK || v > 1 + PROBABILITY_SLACK) {
          return `${name} gave ${v}, outside [0, 1], but output_kind is "softmax" (is it "logits"?)`;
        }
        sum += v;
      }
      if (Math.abs(sum - 1) > SOFTMAX_SUM_TOLERANCE) {
        return `${name} sums to ${sum} over its ${width} classes, not 1 (tolerance ${SOFTMAX_SUM_TOLERANCE}), but output_kind is "softmax" (is it "logits"?)`;
      }
    }
  }
  return null;
}

/** Whether every item's row of `width` values lies in [0, 1] and sums to 1. */
function rowsAreDistributions(data: ArrayLike<number>, batch: number, width: number): boolean {
  for (let b = 0; b < batch; b++) {
    let sum = 0;
    for (let k = 0; k < width; k++) {
      const v = data[b * width + k];
      if (v < -PROBABILITY_SLACK || v > 1 + PROBABILITY_SLACK) return false;
      sum += v;
    }
    if (Math.abs(sum - 1) > SOFTMAX_SUM_TOLERANCE) return false;
  }
  return true;
}

/** Fixed 320 crops: flat grey, black, white and noise, the extremes a camera can send. */
function checkPixels(): Uint8Array[] {
  const grey = new Uint8Array(CROP_SIZE * CROP_SIZE * 3).fill(128);
  const black = new Uint8Array(grey.length);
  const white = new Uint8Array(grey.length).fill(255);
  return [grey, black, white, seededCrop(0x9e3779b9)];
}

/**
 * A model input of the graph's declared shape holding values the service can send: for
 * each channel, (pixel * scale - mean[c]) / std[c] for pixel values from one check crop
 * (uint8 graphs get the pixels). Built here, not by the preprocessing, so that the check
 * tests the graph's outputs and stays independent of how resizing is done.
 */
function imageInput(spec: ImageGraphSpec, pixels: Uint8Array[], channels: number): Feed {
  const n = pixels.length;
  const size = spec.size;
  const out = spec.dtype === 'uint8' ? new Uint8Array(n * channels * size * size) : new Float32Array(n * channels * size * size);
  const step = Math.max(1, Math.floor(CROP_SIZE / size));
  for (let b = 0; b < n; b++) {
    const px = pixels[b];
    for (let ch = 0; ch < channels; ch++) {
      const c = ch % 3;
      const src = spec.channel_order === 'BGR' ? 2 - c : c;
      const diff = spec.role === 'color_difference';
      for (let y = 0; y < size; y++) {
        for (let x = 0; x < size; x++) {
          const p = px[((y * step) * CROP_SIZE + x * step) * 3 + src];
          // a phase difference: this pixel against its mirror, both normalised, so signed
          const v = diff ? ((p - (255 - p)) * spec.scale) / spec.std[c] : (p * spec.scale - spec.mean[c]) / spec.std[c];
          const at = spec.layout === 'NCHW'
            ? ((b * channels + ch) * size + y) * size + x
            : ((b * size + y) * size + x) * channels + ch;
          out[at] = spec.dtype === 'uint8' ? p : v;
        }
      }
    }
  }
  const dims = spec.layout === 'NCHW' ? [n, channels, size, size] : [n, size, size, channels];
  return { data: out, dims };
}

/** How far a batched score may differ from the same item run alone (float rounding of a
 * different kernel path; the check crops' scores differ from each other far more). */
export const BATCH_TOLERANCE = 1e-4;

function batchProblem(output: string, alone: Float32Array[], batched: ArrayLike<number>): string | null {
  const width = batched.length / alone.length;
  for (let b = 0; b < alone.length; b++) {
    for (let k = 0; k < width; k++) {
      const one = alone[b]![k]!;
      const many = batched[b * width + k]!;
      if (Math.abs(one - many) > BATCH_TOLERANCE * Math.max(1, Math.abs(one))) {
        return `output "${output}" differs between batch 1 and batch ${alone.length} on check crop ${b} (${one} vs ${many}): a dynamic-batch graph must score each frame on its own (is its batch really "dynamic"?)`;
      }
    }
  }
  return null;
}

function featureWidth(session: Session, input: string): number | null {
  const shape = session.input(input)?.shape;
  const f = shape?.[2];
  return typeof f === 'number' && f > 0 ? f : null;
}

/**
 * Runs every graph of a module on the check inputs and returns the first problem, or null.
 * `base` names the module (`modules.rgb_liveness`). The temporal head gets the frame
 * graphs' own features for the check crops, so its check sees real feature values.
 */
export async function checkModuleOutputs(base: string, graphs: LoadedGraph[]): Promise<string | null> {
  const crops = checkPixels();
  const where = (i: number) => `${base}.graphs[${i}]: ${graphs[i].spec.file}`;
  // per frame graph with features, per check crop: the runner concatenates them over graphs
  const features: Float32Array[][] = [];
  for (const [i, g] of graphs.entries()) {
    const spec = g.spec;
    if (spec.role === 'temporal') continue;
    const channels = CHANNELS[spec.role];
    // every crop alone, and for a dynamic graph all of them in one batch too
    const own: Float32Array[] = [];
    /** the score output of each crop run alone, to compare with the batch */
    const alone: Float32Array[] = [];
    const batches = crops.map((c) => [c]);
    if (spec.batch === 'dynamic') batches.push(crops.slice(0, MAX_BATCH));
    for (const batch of batches) {
      const wanted = [spec.output, ...(spec.features_output ? [spec.features_output] : [])];
      let out;
      try {
        out = await g.session.run({ [spec.input]: imageInput(spec, batch, channels) }, wanted);
      } catch (e) {
        return `${where(i)} failed on the check inputs: ${(e as Error).message}`;
      }
      const problem = outputProblem(spec, out[spec.output].data, batch.length);
      if (problem) return `${where(i)} ${problem}`;
      if (batch.length === 1) alone.push(out[spec.output].data.slice());
      else {
        // The service packs up to MAX_BATCH frames into one run of a dynamic graph: an item's
        // score must not depend on its neighbours (`models check` compared this on its own
        // before; now every load does)
        const batched = batchProblem(spec.output, alone, out[spec.output].data);
        if (batched) return `${where(i)} ${batched}`;
      }
      if (spec.features_output) {
        const f = out[spec.features_output].data;
        const bad = f.find((v) => !Number.isFinite(v));
        if (bad !== undefined) return `${where(i)} output "${spec.features_output}" gave ${bad} on the check inputs (every value must be finite)`;
        if (batch.length === 1) own.push(f.slice());
      }
    }
    if (own.length > 0) features.push(own);
  }
  const featureSize = features.reduce((sum, g) => sum + (g[0]?.length ?? 0), 0);
  for (const [i, g] of graphs.entries()) {
    const spec = g.spec;
    if (spec.role !== 'temporal') continue;
    const width = featureSize || featureWidth(g.session, spec.input) || 16;
    const frames = crops.length;
    const data = new Float32Array(frames * width);
    if (width === featureSize) {
      for (let k = 0; k < frames; k++) {
        let at = k * width;
        for (const g of features) {
          data.set(g[k]!, at);
          at += g[k]!.length;
        }
      }
    }
    let out;
    try {
      out = await g.session.run({ [spec.input]: { data, dims: [1, frames, width] } }, [spec.output]);
    } catch (e) {
      return `${where(i)} failed on the check inputs: ${(e as Error).message}`;
    }
    const problem = outputProblem(spec, out[spec.output].data, 1);
    if (problem) return `${where(i)} ${problem}`;
  }
  return null;
}
