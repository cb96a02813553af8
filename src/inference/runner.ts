// Runs one module's graphs on one runtime: the per-frame ensemble, the temporal head,
// the colour branches. Lives wherever sessions live (a pool worker, the model check,
// the benchmark); knows nothing about windows or decisions.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PHASES as PHASE_ORDER, RGB8_BYTES, type ModuleId } from '../packets/types.ts';
import { MAX_BATCH, type GraphSpec, type ImageGraphSpec, type Manifest, type TemporalGraphSpec } from './manifest.ts';
import { allocate, dims, prepareFrame, writePlanes, type Plan } from './preprocess.ts';
import type { Feed, Runtime, Session } from './runtime.ts';
import { MAX_FINAL_WINDOW } from './window.ts';
import { combine, liveProbability, type Combined, type Member } from './scores.ts';
import { checkModuleOutputs } from './graph-check.ts';

export interface FrameOutputs {
  /** per frame: ensemble live probability */
  probability: number[];
  /** per frame feature vectors, frames x featureSize, concatenated over the graphs that declare them */
  features: Float32Array | null;
  featureSize: number;
}

export interface ColorOutputs {
  difference: Combined;
  appearance: Combined;
}

interface Loaded<G extends GraphSpec> {
  spec: G;
  session: Session;
}

const PHASES = PHASE_ORDER.length;

// Graphs with the same preprocessing share one prepared input per frame; the key is built
// once per graph spec, not on every run.
const planKeys = new WeakMap<Plan, string>();
function planKey(p: Plan): string {
  let key = planKeys.get(p);
  if (key === undefined) {
    key = JSON.stringify([p.crop_fraction, p.size, p.channel_order, p.scale, p.mean, p.std]);
    planKeys.set(p, key);
  }
  return key;
}

function member(g: GraphSpec, data: Float32Array, item: number, batch: number): Member {
  const width = data.length / batch;
  return { kind: g.output_kind, probability: liveProbability(g.output_kind, data, item, width, g.live_index), raw: data[item * width] };
}

function runScore(l: Loaded<GraphSpec>, feed: Record<string, Feed>, extra: string[] = []) {
  return l.session.run(feed, [l.spec.output, ...extra]);
}

const CHANNELS: Record<ImageGraphSpec['role'], number> = { frame: 3, color_difference: 3 * (PHASES - 1), color_appearance: 3 * PHASES };

/** Compares the graph's declared input with what the manifest makes the service send,
 * so a wrong size, layout, dtype or batch fails at load with both shapes named. */
function inputMismatch(spec: GraphSpec, session: Session): string | null {
  const declared = session.input(spec.input);
  if (!declared) return null;
  const want = spec.role === 'temporal' ? 'float32' : spec.dtype;
  if (declared.type !== want) return `is ${declared.type} but the manifest gives ${want}`;
  if (spec.role === 'temporal') {
    return declared.shape.length === 3 ? null : `has rank ${declared.shape.length}; the temporal head takes [1, frames, features]`;
  }
  const expected: (number | string)[] = dims(spec, spec.batch === 'dynamic' ? MAX_BATCH : 1, CHANNELS[spec.role]);
  if (spec.batch === 'dynamic') expected[0] = 'N';
  const shown = `[${declared.shape.join(', ')}] but the manifest makes it [${expected.join(', ')}]`;
  if (declared.shape.length !== 4) return `is ${shown}`;
  for (let d = 0; d < 4; d++) {
    const got = declared.shape[d];
    if (d === 0 && spec.batch === 'dynamic') {
      if (typeof got === 'number' && got !== -1) return `has a fixed batch: it is ${shown}`;
    } else if (typeof got === 'number' && got !== -1 && got !== expected[d]) {
      return `is ${shown}`;
    }
  }
  return null;
}

export class ModuleRunner {
  private constructor(
    readonly moduleId: ModuleId,
    private readonly frames: Loaded<ImageGraphSpec>[],
    private readonly temporal: Loaded<TemporalGraphSpec> | null,
    private readonly differences: Loaded<ImageGraphSpec>[],
    private readonly appearances: Loaded<ImageGraphSpec>[],
  ) {}

  static async load(runtime: Runtime, manifest: Manifest, moduleId: ModuleId): Promise<ModuleRunner> {
    const mod = manifest.modules[moduleId];
    if (!mod) throw new Error(`model set ${manifest.model_set} does not describe ${moduleId}`);
    const loaded: Loaded<GraphSpec>[] = [];
    for (const [i, spec] of mod.graphs.entries()) {
      let session: Session;
      try {
        session = await runtime.createSession(readFileSync(join(manifest.dir, spec.file)));
      } catch (e) {
        throw new Error(`modules.${moduleId}.graphs[${i}] (${spec.file}) failed to load: ${(e as Error).message}`);
      }
      const wanted = [spec.output, ...('features_output' in spec && spec.features_output ? [spec.features_output] : [])];
      for (const name of wanted) {
        if (!session.outputNames.includes(name)) {
          throw new Error(`modules.${moduleId}.graphs[${i}]: ${spec.file} has no output "${name}" (it has ${session.outputNames.join(', ')})`);
        }
      }
      if (!session.inputNames.includes(spec.input)) {
        throw new Error(`modules.${moduleId}.graphs[${i}]: ${spec.file} has no input "${spec.input}" (it has ${session.inputNames.join(', ')})`);
      }
      const mismatch = inputMismatch(spec, session);
      if (mismatch) throw new Error(`modules.${moduleId}.graphs[${i}]: ${spec.file} input "${spec.input}" ${mismatch}`);
      loaded.push({ spec, session });
    }
    const problem = await checkModuleOutputs(`modules.${moduleId}`, loaded);
    if (problem) {
      for (const l of loaded) await l.session.release();
      throw new Error(problem);
    }
    const byRole = <G extends GraphSpec>(role: GraphSpec['role']) => loaded.filter((l) => l.spec.role === role) as Loaded<G>[];
    return new ModuleRunner(
      moduleId,
      byRole<ImageGraphSpec>('frame'),
      byRole<TemporalGraphSpec>('temporal')[0] ?? null,
      byRole<ImageGraphSpec>('color_difference'),
      byRole<ImageGraphSpec>('color_appearance'),
    );
  }

  /** The frame graphs' specs, in manifest order. */
  frameGraphs(): ImageGraphSpec[] {
    return this.frames.map((l) => l.spec);
  }

  /** Up to MAX_BATCH frames through every frame graph; dynamic-batch graphs take them in
   * one run, fixed-batch graphs one at a time. */
  async runFrames(pixels: Uint8Array[]): Promise<FrameOutputs> {
    const n = pixels.length;
    if (n < 1 || n > MAX_BATCH) throw new Error(`runFrames takes 1 to ${MAX_BATCH} frames, got ${n}`);
    const prepared = new Map<string, Float32Array[][]>();
    const members: Member[][] = pixels.map(() => []);
    const featureParts: { data: Float32Array; width: number }[] = [];
    for (const l of this.frames) {
      const key = planKey(l.spec);
      let planes = prepared.get(key);
      if (!planes) {
        planes = pixels.map((p) => prepareFrame(l.spec, p));
        prepared.set(key, planes);
      }
      const extra = l.spec.features_output ? [l.spec.features_output] : [];
      const batches = l.spec.batch === 'dynamic' ? [[...planes.keys()]] : planes.map((_, i) => [i]);
      let featData: Float32Array | null = null;
      let featWidth = 0;
      for (const items of batches) {
        const input = allocate(l.spec, items.length, 3);
        items.forEach((frame, b) => writePlanes(l.spec, input, planes[frame], b, 0, 3));
        const out = await runScore(l, { [l.spec.input]: { data: input, dims: dims(l.spec, items.length, 3) } }, extra);
        const score = out[l.spec.output].data;
        items.forEach((frame, b) => members[frame].push(member(l.spec, score, b, items.length)));
        if (l.spec.features_output) {
          const f = out[l.spec.features_output].data;
          featWidth = f.length / items.length;
          featData ??= new Float32Array(n * featWidth);
          featData.set(f, items[0] * featWidth);
        }
      }
      if (featData && featWidth > 0) featureParts.push({ data: featData, width: featWidth });
    }
    const combined = members.map((m) => combine(m));
    const featureSize = featureParts.reduce((s, p) => s + p.width, 0);
    let features: Float32Array | null = null;
    if (featureSize > 0) {
      features = new Float32Array(n * featureSize);
      for (let i = 0; i < n; i++) {
        let o = i * featureSize;
        for (const p of featureParts) {
          features.set(p.data.subarray(i * p.width, (i + 1) * p.width), o);
          o += p.width;
        }
      }
    }
    return { probability: combined.map((c) => c.probability), features, featureSize };
  }

  /** The temporal head over [1, frames, featureSize]. */
  async runTemporal(features: Float32Array, frames: number): Promise<Combined> {
    const l = this.temporal;
    if (!l) throw new Error(`${this.moduleId} has no temporal graph`);
    const width = features.length / frames;
    const out = await runScore(l, { [l.spec.input]: { data: features, dims: [1, frames, width] } });
    return combine([member(l.spec, out[l.spec.output].data, 0, 1)]);
  }

  /** The four phase frames (white, red, green, blue) through both colour branches. The
   * difference branch sees the normalised red-white, green-red and blue-green images
   * stacked on the channel axis; the appearance branch the four frames stacked. */
  async runColor(pixels: Uint8Array[]): Promise<ColorOutputs> {
    if (pixels.length !== PHASES) throw new Error(`runColor takes ${PHASES} frames, got ${pixels.length}`);
    const prepared = new Map<string, Float32Array[][]>();
    const planesFor = (spec: ImageGraphSpec) => {
      const key = planKey(spec);
      let planes = prepared.get(key);
      if (!planes) {
        planes = pixels.map((p) => prepareFrame(spec, p));
        prepared.set(key, planes);
      }
      return planes;
    };
    const difference: Member[] = [];
    for (const l of this.differences) {
      const planes = planesFor(l.spec);
      const input = allocate(l.spec, 1, 3 * (PHASES - 1));
      for (let k = 1; k < PHASES; k++) {
        const diff = planes[k].map((plane, c) => {
          const prev = planes[k - 1][c];
          const d = new Float32Array(plane.length);
          for (let i = 0; i < d.length; i++) d[i] = plane[i] - prev[i];
          return d;
        });
        writePlanes(l.spec, input, diff, 0, 3 * (k - 1), 3 * (PHASES - 1));
      }
      const out = await runScore(l, { [l.spec.input]: { data: input, dims: dims(l.spec, 1, 3 * (PHASES - 1)) } });
      difference.push(member(l.spec, out[l.spec.output].data, 0, 1));
    }
    const appearance: Member[] = [];
    for (const l of this.appearances) {
      const planes = planesFor(l.spec);
      const input = allocate(l.spec, 1, 3 * PHASES);
      planes.forEach((p, k) => writePlanes(l.spec, input, p, 0, 3 * k, 3 * PHASES));
      const out = await runScore(l, { [l.spec.input]: { data: input, dims: dims(l.spec, 1, 3 * PHASES) } });
      appearance.push(member(l.spec, out[l.spec.output].data, 0, 1));
    }
    return { difference: combine(difference), appearance: combine(appearance) };
  }

  /** ORT-web reaches steady speed only after a few dozen runs per session, so every
   * graph runs `runs` times with every batch size and window length it will see. */
  async warmup(runs: number): Promise<void> {
    const crop = new Uint8Array(RGB8_BYTES);
    for (let i = 0; i < crop.length; i++) crop[i] = (i * 2654435761) >>> 24;
    // the manifest check guarantees frame graphs wherever there is a temporal head
    let featureSize = 0;
    if (this.frames.length > 0) {
      for (let r = 0; r < Math.max(1, runs); r++) {
        featureSize = (await this.runFrames(Array.from({ length: (r % MAX_BATCH) + 1 }, () => crop))).featureSize;
      }
    }
    if (this.temporal) {
      for (let r = 0; r < Math.max(1, runs); r++) {
        const frames = (r % MAX_FINAL_WINDOW) + 1;
        await this.runTemporal(new Float32Array(frames * featureSize).fill(0.5), frames);
      }
    }
    if (this.differences.length > 0) {
      for (let r = 0; r < Math.max(1, runs); r++) await this.runColor([crop, crop, crop, crop]);
    }
  }

  async release(): Promise<void> {
    for (const l of [...this.frames, ...this.differences, ...this.appearances, ...(this.temporal ? [this.temporal] : [])]) {
      await l.session.release();
    }
  }
}
