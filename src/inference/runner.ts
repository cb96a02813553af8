// Runs one module's graphs on one runtime: the per-frame ensemble, the temporal head,
// the colour branches. Lives wherever sessions live (a pool worker, the model check,
// the benchmark); knows nothing about windows or decisions.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PHASES as PHASE_ORDER } from '../packets/index.ts';
import { RGB8_BYTES, type ModuleId } from '../contract/index.ts';
import { MAX_BATCH, type GraphSpec, type ImageGraphSpec, type Manifest, type TemporalGraphSpec } from './manifest.ts';
import { dims, FramePreparer, InputBuffer, type Plan } from './preprocess.ts';
import type { Feed, Runtime, Session } from './runtime.ts';
import { MAX_FINAL_WINDOW } from './window.ts';
import { combine, liveProbability, type Combined, type Member } from './scores.ts';
import { checkModuleOutputs } from './graph-check.ts';
import { graphFileProblem } from './graph-safety.ts';

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

/** An image graph with its compiled preprocessing and its reused input tensor. */
interface LoadedImage extends Loaded<ImageGraphSpec> {
  prep: FramePreparer;
  input: InputBuffer;
}

const PHASES = PHASE_ORDER.length;

// Graphs with the same preprocessing share one scratch per colour phase; the key is built
// once per graph spec, at load.
function planKey(p: Plan): string {
  return JSON.stringify([p.crop_fraction, p.size, p.resize ?? 'area', p.channel_order, p.scale, p.mean, p.std]);
}

function member(g: GraphSpec, data: Float32Array, item: number, batch: number): Member {
  const width = data.length / batch;
  return { kind: g.output_kind, probability: liveProbability(g.output_kind, data, item, width, g.live_index), raw: data[item * width] };
}

function runScore(l: Loaded<GraphSpec>, feed: Record<string, Feed>, extra: string[] = []) {
  return l.session.run(feed, [l.spec.output, ...extra]);
}

/** Copies planar float32 channels (`count` planes of n) into channels [channelOffset, +count)
 * of item 0 of an input tensor in the spec's layout; uint8 inputs rounded and clamped.
 * With `minus`, writes plane - minus (the colour phase differences). */
function putPlanes(l: LoadedImage, planes: Float32Array, minus: Float32Array | null, channelOffset: number, count: number): void {
  const dst = l.input.data;
  const n = l.prep.pixelsPerPlane;
  const channels = l.input.channels;
  const nchw = l.spec.layout === 'NCHW';
  const u8 = dst instanceof Uint8Array;
  const fround = Math.fround;
  for (let c = 0; c < count; c++) {
    const src = c * n;
    const cs = nchw ? (channelOffset + c) * n : channelOffset + c;
    const ps = nchw ? 1 : channels;
    for (let i = 0; i < n; i++) {
      const v = minus ? fround(planes[src + i] - minus[src + i]) : planes[src + i];
      dst[cs + i * ps] = u8 ? (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v)) : v;
    }
  }
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
  /** planKey -> one float32 [3][n] scratch per colour phase, reused by every runColor */
  private readonly phaseScratch = new Map<string, Float32Array[]>();
  // The input tensors and scratch are reused, so one call runs at a time; a pool worker
  // takes one task at a time, and the guard makes any other caller's mistake loud.
  private busy = false;

  private constructor(
    readonly moduleId: ModuleId,
    private readonly frames: LoadedImage[],
    private readonly temporal: Loaded<TemporalGraphSpec> | null,
    private readonly differences: LoadedImage[],
    private readonly appearances: LoadedImage[],
  ) {
    for (const l of [...differences, ...appearances]) {
      const key = planKey(l.spec);
      if (!this.phaseScratch.has(key)) {
        this.phaseScratch.set(key, Array.from({ length: PHASES }, () => new Float32Array(3 * l.prep.pixelsPerPlane)));
      }
    }
  }

  static async load(runtime: Runtime, manifest: Manifest, moduleId: ModuleId): Promise<ModuleRunner> {
    const mod = manifest.modules[moduleId];
    if (!mod) throw new Error(`model set ${manifest.model_set} does not describe ${moduleId}`);
    const loaded: Loaded<GraphSpec>[] = [];
    for (const [i, spec] of mod.graphs.entries()) {
      let session: Session;
      const bytes = readFileSync(join(manifest.dir, spec.file));
      // before any runtime sees the bytes: no external data, no Loop (graph-safety.ts)
      const unsafe = graphFileProblem(bytes);
      if (unsafe) {
        for (const l of loaded) await l.session.release();
        throw new Error(`modules.${moduleId}.graphs[${i}] (${spec.file}) ${unsafe}`);
      }
      try {
        session = await runtime.createSession(bytes);
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
      if (spec.role === 'temporal') {
        loaded.push({ spec, session });
      } else {
        const capacity = spec.batch === 'dynamic' ? MAX_BATCH : 1;
        const image: LoadedImage = { spec, session, prep: new FramePreparer(spec), input: new InputBuffer(spec, capacity, CHANNELS[spec.role]) };
        loaded.push(image);
      }
    }
    const problem = await checkModuleOutputs(`modules.${moduleId}`, loaded);
    if (problem) {
      for (const l of loaded) await l.session.release();
      throw new Error(problem);
    }
    const byRole = <G extends Loaded<GraphSpec>>(role: GraphSpec['role']) => loaded.filter((l) => l.spec.role === role) as G[];
    return new ModuleRunner(
      moduleId,
      byRole<LoadedImage>('frame'),
      byRole<Loaded<TemporalGraphSpec>>('temporal')[0] ?? null,
      byRole<LoadedImage>('color_difference'),
      byRole<LoadedImage>('color_appearance'),
    );
  }

  /** The frame graphs' specs, in manifest order. */
  frameGraphs(): ImageGraphSpec[] {
    return this.frames.map((l) => l.spec);
  }

  private async exclusive<T>(work: () => Promise<T>): Promise<T> {
    if (this.busy) throw new Error(`${this.moduleId} runner is already running a call; its buffers are reused`);
    this.busy = true;
    try {
      return await work();
    } finally {
      this.busy = false;
    }
  }

  /** Up to MAX_BATCH frames through every frame graph; dynamic-batch graphs take them in
   * one run, fixed-batch graphs one at a time. */
  runFrames(pixels: Uint8Array[]): Promise<FrameOutputs> {
    return this.exclusive(() => this.frameRuns(pixels));
  }

  private async frameRuns(pixels: Uint8Array[]): Promise<FrameOutputs> {
    const n = pixels.length;
    if (n < 1 || n > MAX_BATCH) throw new Error(`runFrames takes 1 to ${MAX_BATCH} frames, got ${n}`);
    const members: Member[][] = pixels.map(() => []);
    const featureParts: { data: Float32Array; width: number }[] = [];
    for (const l of this.frames) {
      const extra = l.spec.features_output ? [l.spec.features_output] : [];
      const dynamic = l.spec.batch === 'dynamic';
      const runs = dynamic ? 1 : n;
      const per = dynamic ? n : 1;
      let featData: Float32Array | null = null;
      let featWidth = 0;
      for (let r = 0; r < runs; r++) {
        for (let b = 0; b < per; b++) l.prep.write(pixels[r * per + b], l.input.data, b, 0, 3);
        const out = await runScore(l, { [l.spec.input]: { data: l.input.view(per), dims: l.input.dims(per) } }, extra);
        const score = out[l.spec.output].data;
        for (let b = 0; b < per; b++) members[r * per + b].push(member(l.spec, score, b, per));
        if (l.spec.features_output) {
          const f = out[l.spec.features_output].data;
          featWidth = f.length / per;
          featData ??= new Float32Array(n * featWidth);
          featData.set(f, r * per * featWidth);
        }
      }
      if (featData && featWidth > 0) featureParts.push({ data: featData, width: featWidth });
    }
    const probability = members.map((m) => combine(m).probability);
    const featureSize = featureParts.reduce((s, p) => s + p.width, 0);
    let features: Float32Array | null = null;
    if (featureParts.length === 1) {
      features = featureParts[0].data;
    } else if (featureSize > 0) {
      features = new Float32Array(n * featureSize);
      for (let i = 0; i < n; i++) {
        let o = i * featureSize;
        for (const p of featureParts) {
          features.set(p.data.subarray(i * p.width, (i + 1) * p.width), o);
          o += p.width;
        }
      }
    }
    return { probability, features, featureSize };
  }

  /** The temporal head over [1, frames, featureSize]. */
  runTemporal(features: Float32Array, frames: number): Promise<Combined> {
    return this.exclusive(async () => {
      const l = this.temporal;
      if (!l) throw new Error(`${this.moduleId} has no temporal graph`);
      const width = features.length / frames;
      const out = await runScore(l, { [l.spec.input]: { data: features, dims: [1, frames, width] } });
      return combine([member(l.spec, out[l.spec.output].data, 0, 1)]);
    });
  }

  /** The four phase frames (white, red, green, blue) through both colour branches. The
   * difference branch sees the normalised red-white, green-red and blue-green images
   * stacked on the channel axis; the appearance branch the four frames stacked. */
  runColor(pixels: Uint8Array[]): Promise<ColorOutputs> {
    return this.exclusive(() => this.colorRuns(pixels));
  }

  private async colorRuns(pixels: Uint8Array[]): Promise<ColorOutputs> {
    if (pixels.length !== PHASES) throw new Error(`runColor takes ${PHASES} frames, got ${pixels.length}`);
    const done = new Set<string>();
    const phases = (l: LoadedImage): Float32Array[] => {
      const key = planKey(l.spec);
      const scratch = this.phaseScratch.get(key)!;
      if (!done.has(key)) {
        for (let k = 0; k < PHASES; k++) l.prep.planes(pixels[k], scratch[k]);
        done.add(key);
      }
      return scratch;
    };
    const difference: Member[] = [];
    for (const l of this.differences) {
      const planes = phases(l);
      for (let k = 1; k < PHASES; k++) putPlanes(l, planes[k], planes[k - 1], 3 * (k - 1), 3);
      const out = await runScore(l, { [l.spec.input]: { data: l.input.view(1), dims: l.input.dims(1) } });
      difference.push(member(l.spec, out[l.spec.output].data, 0, 1));
    }
    const appearance: Member[] = [];
    for (const l of this.appearances) {
      const planes = phases(l);
      for (let k = 0; k < PHASES; k++) putPlanes(l, planes[k], null, 3 * k, 3);
      const out = await runScore(l, { [l.spec.input]: { data: l.input.view(1), dims: l.input.dims(1) } });
      appearance.push(member(l.spec, out[l.spec.output].data, 0, 1));
    }
    return { difference: combine(difference), appearance: combine(appearance) };
  }

  /** ORT-web reaches steady speed only after a few dozen runs per session, so every
   * graph runs `runs` times with every batch size and window length it will see.
   * `stop`, asked before each run: true ends the warm-up there (the pool is closing; a stop
   * during a long warm-up waited for all its runs: WARMUP_RUNS=400 held a test's close for
   * seconds of CPU, issue 43). */
  async warmup(runs: number, stop: () => boolean = () => false): Promise<void> {
    const crop = new Uint8Array(RGB8_BYTES);
    for (let i = 0; i < crop.length; i++) crop[i] = (i * 2654435761) >>> 24;
    // the manifest check guarantees frame graphs wherever there is a temporal head
    let featureSize = 0;
    if (this.frames.length > 0) {
      for (let r = 0; r < Math.max(1, runs); r++) {
        if (stop()) return;
        featureSize = (await this.runFrames(Array.from({ length: (r % MAX_BATCH) + 1 }, () => crop))).featureSize;
      }
    }
    if (this.temporal) {
      for (let r = 0; r < Math.max(1, runs); r++) {
        if (stop()) return;
        const frames = (r % MAX_FINAL_WINDOW) + 1;
        await this.runTemporal(new Float32Array(frames * featureSize).fill(0.5), frames);
      }
    }
    if (this.differences.length > 0) {
      for (let r = 0; r < Math.max(1, runs); r++) {
        if (stop()) return;
        await this.runColor([crop, crop, crop, crop]);
      }
    }
  }

  async release(): Promise<void> {
    for (const l of [...this.frames, ...this.differences, ...this.appearances, ...(this.temporal ? [this.temporal] : [])]) {
      await l.session.release();
    }
  }
}
