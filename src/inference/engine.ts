// The inference engine: one per process, in the main thread. It owns the pool and
// turns prepared captures into result records; API workers reach it over MessagePorts.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { MODULE_IDS, PHASES, type ModuleId, type PreparedCapture } from '../packets/types.ts';
import { decide, retry, type Policy } from './decision.ts';
import { fuse } from './fusion.ts';
import { loadManifest, MAX_BATCH, minFinalFrames, type Manifest } from './manifest.ts';
import { InferencePool, poolShape, transferable, type PoolTimes } from './pool.ts';
import type { WorkerReport } from './protocol.ts';
import type { FrameOutputs } from './runner.ts';
import { webGpuAdapter } from './runtime.ts';
import { logit } from './scores.ts';
import type { ExecutionProvider, InferenceJob, InferenceService, ModePolicy, ModuleReadiness, ResultRecord } from './types.ts';
import { scoreJumps, structuralWindow } from './window.ts';

export type Backend = 'auto' | 'wasm' | 'webgpu' | 'native';

export interface EngineOptions {
  modelsDir: string;
  modelSet: string;
  backend: Backend;
  /** total inference threads (INFERENCE_THREADS); default the CPU cores */
  threads: number;
  /** runs per graph and worker before a module reports ready (default 30) */
  warmupRuns?: number;
  /** default: both modules */
  enabledModules?: ModuleId[];
  log?: (obj: object, msg: string) => void;
}

export interface InferenceEngine extends InferenceService {
  /** Loads and warms every enabled module; resolves when all are ready. readiness()
   * shows progress meanwhile, so the caller need not wait for it. */
  start(): Promise<void>;
  close(): Promise<void>;
  /** the provider actually in use; before start() the one requested (auto: wasm) */
  readonly executionProvider: ExecutionProvider;
  /** the pool's per-task queue-wait and run-time summaries (ms), null before start */
  poolTimes(): PoolTimes | null;
}


function modePolicies(manifest: Manifest, id: ModuleId): ModePolicy[] {
  const out: ModePolicy[] = [];
  if (id === 'rgb_liveness') {
    const m = manifest.modules.rgb_liveness?.modes;
    if (m?.rgb_single) out.push({ mode: 'rgb_single', decision_policy: m.rgb_single.decision_policy, threshold: m.rgb_single.threshold, min_final_frames: null });
    if (m?.rgb_sequence) out.push({ mode: 'rgb_sequence', decision_policy: m.rgb_sequence.decision_policy, threshold: m.rgb_sequence.threshold, min_final_frames: minFinalFrames(m.rgb_sequence) });
  } else {
    const c = manifest.modules.color_liveness?.modes.color;
    if (c) out.push({ mode: 'color', decision_policy: c.decision_policy, threshold: c.threshold, min_final_frames: null });
  }
  return out;
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

class Engine implements InferenceEngine {
  private pool: InferencePool | null = null;
  private provider: ExecutionProvider | null = null;
  private readonly warm = new Map<ModuleId, Set<number>>();
  private readonly errors = new Map<ModuleId, string>();
  private readonly loadable: ModuleId[];
  private started: Promise<void> | null = null;
  private settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private closed = false;
  /** set when serving on a fallback WebGPU adapter, shown in readiness */
  private adapterNote: string | null = null;

  constructor(
    private readonly manifest: Manifest,
    private readonly opts: EngineOptions,
    private readonly enabled: ModuleId[],
  ) {
    this.loadable = enabled.filter((id) => manifest.modules[id] !== undefined);
    for (const id of enabled) {
      if (!manifest.modules[id]) this.errors.set(id, `model set ${manifest.model_set} does not describe ${id}`);
    }
  }

  get executionProvider(): ExecutionProvider {
    return this.provider ?? (this.opts.backend === 'native' ? 'native' : this.opts.backend === 'webgpu' ? 'webgpu' : 'wasm');
  }

  private log(obj: object, msg: string): void {
    this.opts.log?.(obj, msg);
  }

  start(): Promise<void> {
    this.started ??= this.boot();
    return this.started;
  }

  private async resolveProvider(): Promise<ExecutionProvider> {
    const backend = this.opts.backend;
    if (backend === 'native') return 'native';
    if (backend === 'wasm') return 'wasm';
    const adapter = await webGpuAdapter();
    // A fallback adapter is a CPU emulation (SwiftShader): `auto` never serves on it; an
    // explicit `webgpu` does, and readiness says so.
    if (adapter && (!adapter.fallback || backend === 'webgpu')) {
      this.log({ adapter: adapter.name, fallback: adapter.fallback }, 'inference: WebGPU adapter found');
      if (adapter.fallback) this.adapterNote = `WebGPU on a fallback adapter (${adapter.name}): a CPU emulation, far slower than WASM`;
      return 'webgpu';
    }
    if (adapter) {
      this.log({ adapter: adapter.name }, 'inference: only a fallback WebGPU adapter (CPU emulation), using WASM');
      return 'wasm';
    }
    this.log({ requested: backend }, 'inference: no WebGPU adapter, falling back to WASM');
    return 'wasm';
  }

  private async boot(): Promise<void> {
    this.provider = await this.resolveProvider();
    if (this.closed) return;
    const cores = availableParallelism();
    const { workers, sessionThreads } = poolShape(this.opts.threads || cores, this.provider);
    this.log({ provider: this.provider, workers, sessionThreads, modules: this.loadable }, 'inference: starting pool');
    if (this.loadable.length === 0) return;
    const done = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.pool = new InferencePool(
      {
        manifest: this.manifest,
        modules: this.loadable,
        provider: this.provider,
        sessionThreads,
        warmupRuns: this.opts.warmupRuns ?? 30,
      },
      workers,
      (r) => this.onReport(r, workers),
      (e) => {
        this.log({ err: e.message }, 'inference: worker error');
        for (const id of this.loadable) if (!this.isReady(id)) this.errors.set(id, e.message);
        this.settle?.reject(e);
      },
    );
    await done;
  }

  private onReport(r: WorkerReport, workers: number): void {
    if (r.kind === 'provider') {
      if (r.provider !== this.provider) {
        this.log({ note: r.note }, 'inference: worker fell back');
        this.provider = r.provider;
      }
      return;
    }
    if (r.kind === 'error') {
      const modules = r.module ? [r.module] : this.loadable;
      for (const id of modules) this.errors.set(id, r.message);
      this.log({ module: r.module, err: r.message }, 'inference: module failed to load');
      this.settle?.reject(new Error(r.message));
      return;
    }
    const set = this.warm.get(r.module) ?? new Set<number>();
    set.add(r.worker);
    this.warm.set(r.module, set);
    this.log({ module: r.module, worker: r.worker, ms: Math.round(r.ms) }, 'inference: worker warm');
    if (this.loadable.every((id) => (this.warm.get(id)?.size ?? 0) >= workers)) this.settle?.resolve();
  }

  private isReady(id: ModuleId): boolean {
    return this.pool !== null && !this.errors.has(id) && (this.warm.get(id)?.size ?? 0) >= this.pool.workers;
  }

  readiness(): ModuleReadiness[] {
    return this.enabled.map((module_id) => {
      const modes = modePolicies(this.manifest, module_id);
      return {
        module_id,
        ready: this.isReady(module_id),
        model_set: this.manifest.model_set,
        decision_policy: modes[0]?.decision_policy ?? '',
        threshold: modes[0]?.threshold ?? 0,
        execution_provider: this.provider,
        ...(this.adapterNote && this.provider === 'webgpu' ? { execution_note: this.adapterNote } : {}),
        error: this.errors.get(module_id) ?? null,
        modes,
      };
    });
  }

  poolTimes(): PoolTimes | null {
    return this.pool?.times ?? null;
  }

  async infer(job: InferenceJob): Promise<ResultRecord[]> {
    const pool = this.pool;
    if (!pool) throw new Error('inference engine is not started');
    if (!this.loadable.includes(job.module_id)) {
      throw new Error(`${job.module_id} is not available: ${this.errors.get(job.module_id) ?? 'not enabled'}`);
    }
    return Promise.all(job.captures.map((c) => this.capture(pool, job.module_id, c)));
  }

  private policy(module: ModuleId, mode: PreparedCapture['packet']['mode']): Policy {
    const p = modePolicies(this.manifest, module).find((m) => m.mode === mode);
    if (!p) throw new Error(`model set ${this.manifest.model_set} has no ${mode} mode in ${module}`);
    return { model_set: this.manifest.model_set, decision_policy: p.decision_policy, threshold: p.threshold, min_final_frames: p.min_final_frames };
  }

  private capture(pool: InferencePool, module: ModuleId, c: PreparedCapture): Promise<ResultRecord> {
    switch (c.packet.mode) {
      case 'rgb_single':
        return this.single(pool, module, c);
      case 'rgb_sequence':
        return this.sequence(pool, module, c);
      case 'color':
        return this.color(pool, module, c);
    }
  }

  private async frames(pool: InferencePool, module: ModuleId, c: PreparedCapture, positions: number[]): Promise<FrameOutputs[]> {
    return Promise.all(
      chunks(positions, MAX_BATCH).map((batch) => {
        const pixels = batch.map((i) => {
          const px = c.pixels[i];
          if (!px) throw new Error(`capture ${c.packet.capture_id}: frame ${i} has no pixels`);
          return transferable(px);
        });
        return pool.run({ op: 'frames', module, pixels }, pixels.map((p) => p.buffer as ArrayBuffer));
      }),
    );
  }

  private async single(pool: InferencePool, module: ModuleId, c: PreparedCapture): Promise<ResultRecord> {
    const policy = this.policy(module, 'rgb_single');
    const { packet } = c;
    if (!packet.complete) return retry(packet, policy, 'incomplete_capture');
    const last = packet.frames.length - 1;
    if (!packet.frames.some((f) => f.status === 'ok')) return retry(packet, policy, 'no_usable_frames');
    if (packet.frames[last].status !== 'ok') return retry(packet, policy, 'terminal_frame_unavailable');
    const [out] = await this.frames(pool, module, c, [last]);
    const score = out.probability[0];
    return decide(packet, policy, score, { single_score: score });
  }

  private async sequence(pool: InferencePool, module: ModuleId, c: PreparedCapture): Promise<ResultRecord> {
    const policy = this.policy(module, 'rgb_sequence');
    const spec = this.manifest.modules.rgb_liveness!.modes.rgb_sequence!;
    const { packet } = c;
    const frames = packet.frames;
    if (!packet.complete) return retry(packet, policy, 'incomplete_capture');
    const structural = structuralWindow(frames);
    if (!frames.some((f) => f.status === 'ok')) return retry(packet, policy, 'no_usable_frames', { reset_events: structural.resets });
    if (frames[frames.length - 1].status !== 'ok') {
      return retry(packet, policy, 'terminal_frame_unavailable', { reset_events: structural.resets });
    }
    const outs = await this.frames(pool, module, c, structural.candidates);
    const probability = outs.flatMap((o) => o.probability);
    const sourceIndices = structural.candidates.map((i) => frames[i].source_index);
    const jumps = scoreJumps(sourceIndices, probability, spec.score_jump_limit);
    const windowIndices = sourceIndices.slice(jumps.start);
    const diagnostics = {
      final_window_frames: windowIndices.length,
      window_frame_indices: windowIndices,
      reset_events: [...structural.resets, ...jumps.resets],
    };
    if (windowIndices.length < minFinalFrames(spec)) return retry(packet, policy, 'insufficient_final_window', diagnostics);
    if (spec.decision_policy === 'temporal_head_v1') {
      const size = outs[0].featureSize;
      const features = new Float32Array(windowIndices.length * size);
      let row = 0;
      for (const o of outs) {
        for (let i = 0; i < o.probability.length; i++, row++) {
          if (row >= jumps.start) features.set(o.features!.subarray(i * size, (i + 1) * size), (row - jumps.start) * size);
        }
      }
      const head = await pool.run({ op: 'temporal', module, features, frames: windowIndices.length }, [features.buffer]);
      return decide(packet, policy, head.probability, { ...diagnostics, temporal_logit: head.logit });
    }
    // window_mean_v1: the mean live probability over the final window.
    const window = probability.slice(jumps.start);
    const score = window.reduce((s, p) => s + p, 0) / window.length;
    return decide(packet, policy, score, { ...diagnostics, temporal_logit: logit(score) });
  }

  private async color(pool: InferencePool, module: ModuleId, c: PreparedCapture): Promise<ResultRecord> {
    const policy = this.policy(module, 'color');
    const spec = this.manifest.modules.color_liveness!.modes.color;
    const { packet } = c;
    const frames = packet.frames;
    if (!packet.complete) return retry(packet, policy, 'incomplete_capture');
    if (!frames.some((f) => f.status === 'ok')) return retry(packet, policy, 'no_usable_frames');
    if (frames[frames.length - 1].status !== 'ok') return retry(packet, policy, 'terminal_frame_unavailable');
    // Fusion needs all four phases ok. The contract keeps incomplete_capture for complete=false,
    // so a complete group with a failed phase has too few usable frames for its window.
    const whole = frames.length === PHASES.length && frames.every((f, i) => f.status === 'ok' && f.phase === PHASES[i]);
    if (!whole) return retry(packet, policy, 'insufficient_final_window');
    const pixels = c.pixels.map((px, i) => {
      if (!px) throw new Error(`capture ${packet.capture_id}: phase ${i} has no pixels`);
      return transferable(px);
    });
    const out = await pool.run({ op: 'color', module, pixels }, pixels.map((p) => p.buffer as ArrayBuffer));
    const { logits, score } = fuse(spec.fusion, out.difference.logit, out.appearance.logit);
    return decide(packet, policy, score, { color_logits: logits });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.settle?.reject(new Error('inference engine closed'));
    const pool = this.pool;
    this.pool = null;
    await pool?.close();
  }
}

export function createInferenceEngine(opts: EngineOptions): InferenceEngine {
  const manifest = loadManifest(join(opts.modelsDir, opts.modelSet));
  const enabled = opts.enabledModules ?? [...MODULE_IDS];
  return new Engine(manifest, opts, enabled);
}
