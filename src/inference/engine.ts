// The inference engine: one per process, in the main thread. It owns the pool and
// turns prepared captures into result records; API workers reach it over MessagePorts.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { type PreparedCapture } from '../packets/index.ts';
import { MODULE_IDS, type Mode, type ModuleId } from '../contract/index.ts';
import { loadManifest, MAX_BATCH, type Manifest } from './manifest.ts';
import { modePolicies, policyFor } from './modes/index.ts';
import { InferencePool, poolShape, RELEASE_WAIT_MS, transferable, type PoolTimes } from './pool.ts';
import type { WorkerReport } from './protocol.ts';
import { allowWasmTierUp, webGpuAdapter, type WebGpuAdapter } from './runtime.ts';
import { chooseBackend, CPU_CANDIDATES, measureBackends, type BackendChoice } from './backend-probe.ts';
import { noAdapterNote } from './gpu-host.ts';
import { isSharedPixels } from '../images/index.ts';
import { ReadinessEvents, type ReadinessListener } from './readiness-events.ts';
import type { ExecutionProvider, InferenceJob, InferenceService, InferenceTiming, ModuleReadiness, ResultRecord } from './types.ts';

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
  /** REQUIRE_TRAINED_MODELS: a set whose manifest says `trained: false` never reports ready */
  requireTrained?: boolean;
  log?: (obj: object, msg: string) => void;
  /** how the engine looks for a WebGPU adapter (default: Dawn's); a test can present an
   * emulated adapter as hardware, to drive `auto`'s GPU measurement where no GPU exists */
  findAdapter?: () => Promise<WebGpuAdapter | null>;
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
  /** the latest default-metrics snapshot each pool thread pushed (prom-client JSON) */
  poolMetrics(): unknown[][];
  /** pool tasks and captures sent so far (each task is one message each way) */
  counters(): EngineCounters;
  /** An empty task to a pool thread and back (bench/relay.mjs); rejects before start. */
  ping(): Promise<void>;
  /** `listener` hears readiness() each time it changes (warm-up done, a module failed, a
   * fallback, the engine closed); returns the unsubscribe function. */
  onReadinessChange(listener: ReadinessListener): () => void;
}


/** What crossed between the main thread and the pool since start: one task message out
 * and one reply back per task. */
export interface EngineCounters {
  tasks: number;
  captures: number;
}

interface Waiting {
  capture: PreparedCapture;
  resolve: (r: ResultRecord) => void;
  reject: (e: Error) => void;
  /** its job's stages, when the caller traces it */
  timing: InferenceTiming | undefined;
}

/** epoch ms on the clock every thread shares (InferenceTiming) */
const epochNow = () => performance.timeOrigin + performance.now();

/** One pool task in the making: captures of one module and mode. */
interface Group {
  module: ModuleId;
  mode: Mode;
  items: Waiting[];
}

class Engine implements InferenceEngine {
  private pool: InferencePool | null = null;
  private provider: ExecutionProvider | null = null;
  private readonly warm = new Map<ModuleId, Set<number>>();
  private readonly threadMetrics = new Map<number, unknown[]>();
  private readonly errors = new Map<ModuleId, string>();
  private readonly loadable: ModuleId[];
  private started: Promise<void> | null = null;
  private settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private closed = false;
  /** ends `auto`'s start-up measurement early when the engine closes during it */
  private readonly closing = new AbortController();
  /** shown in readiness: serving on a fallback WebGPU adapter, or on WASM where WebGPU was
   * wanted and no adapter was found */
  private adapterNote: string | null = null;
  /** `auto` on a CPU host: what the start-up measurement found */
  private choice: BackendChoice | null = null;
  // Tasks not yet given to the pool. At most one task per pool worker is in flight, so
  // while all are busy single-frame captures, of one request or of several, gather here
  // into groups of up to MAX_BATCH. Bounded by admission: only admitted verify calls
  // reach the engine, each with at most 32 captures.
  private readonly queue: Group[] = [];
  private inFlight = 0;
  private pumpScheduled = false;
  private readonly counts: EngineCounters = { tasks: 0, captures: 0 };
  /**
   * Single-frame captures per task. Packing pays when the frame graphs take a dynamic
   * batch (4 frames in one model run). With fixed-batch graphs it saves only messages, and
   * coarser tasks balanced worse over the pool: on tiny128 batch32, packed tasks ran at
   * 0.43-0.97x the previous (unpacked) engine in 6 of 6 interleaved rounds of
   * bench/engine.mjs, unpacked ones at a median 1.22x, so such captures go one by one.
   */
  private readonly packSize: number;
  private readonly readinessEvents = new ReadinessEvents(() => this.readiness());

  constructor(
    private readonly manifest: Manifest,
    private readonly opts: EngineOptions,
    private readonly enabled: ModuleId[],
  ) {
    this.loadable = enabled.filter((id) => manifest.modules[id] !== undefined);
    const frameGraphs = (manifest.modules.rgb_liveness?.graphs ?? []).filter((g) => g.role === 'frame');
    this.packSize = frameGraphs.length > 0 && frameGraphs.every((g) => g.role === 'frame' && g.batch === 'dynamic') ? MAX_BATCH : 1;
    for (const id of enabled) {
      if (!manifest.modules[id]) this.errors.set(id, `model set ${manifest.model_set} does not describe ${id}`);
      // Random weights answer live and not live by chance: a production host sets
      // REQUIRE_TRAINED_MODELS so that such a set can neither serve nor be switched to.
      else if (opts.requireTrained && !manifest.trained) {
        this.errors.set(id, `model set ${manifest.model_set} is untrained (its manifest says trained: false) and REQUIRE_TRAINED_MODELS is set`);
      }
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

  onReadinessChange(listener: ReadinessListener): () => void {
    return this.readinessEvents.listen(listener);
  }

  private async resolveProvider(): Promise<ExecutionProvider> {
    const backend = this.opts.backend;
    if (backend === 'native') return 'native';
    if (backend === 'wasm') return 'wasm';
    const adapter = await (this.opts.findAdapter ?? webGpuAdapter)();
    if (backend === 'webgpu') {
      // an explicit `webgpu` serves on any adapter, a fallback one (SwiftShader) included,
      // and readiness says so
      if (adapter) {
        this.log({ adapter: adapter.name, fallback: adapter.fallback }, 'inference: WebGPU adapter found');
        if (adapter.fallback) this.adapterNote = `WebGPU on a fallback adapter (${adapter.name}): a CPU emulation, far slower than WASM`;
        return 'webgpu';
      }
      this.log({ requested: backend }, 'inference: no WebGPU adapter, falling back to WASM');
      this.adapterNote = noAdapterNote('webgpu');
      return 'wasm';
    }
    // `auto`: a GPU serves only where it measured faster than the CPU backends on these graphs
    // (on an H100 WebGPU lost to the CPU on most kinds: docs/gpu.md), so a hardware adapter
    // makes it one more candidate, never the answer by its presence. A fallback adapter is a CPU
    // emulation and is not measured.
    if (adapter && !adapter.fallback) {
      this.log({ adapter: adapter.name }, 'inference: WebGPU adapter found, measuring it against the CPU backends');
      return this.measureBackends([...CPU_CANDIDATES, 'webgpu']);
    }
    if (adapter) this.log({ adapter: adapter.name }, 'inference: only a fallback WebGPU adapter (CPU emulation), measuring the CPU backends');
    // a GPU device node without an adapter: the host lacks what Dawn needs (docs/gpu.md)
    else this.adapterNote = noAdapterNote('auto');
    return this.measureBackends(CPU_CANDIDATES);
  }

  /** `auto`: the fastest of `candidates` that loads these graphs here. */
  private async measureBackends(candidates: ExecutionProvider[]): Promise<ExecutionProvider> {
    if (this.loadable.length === 0) return 'wasm';
    const { sessionThreads } = poolShape(this.opts.threads || availableParallelism(), 'wasm');
    // As long as the pool's own warm-up at most: a test or a CLI that asks for a short warm-up
    // gets a short measurement (the backends differ by several times, not by percents).
    const warmup = this.opts.warmupRuns ?? 30;
    this.log({ candidates }, 'inference: measuring the backends');
    const figures = await measureBackends({
      manifest: this.manifest, modules: this.loadable, threads: sessionThreads, candidates,
      warmupRuns: Math.min(20, Math.max(2, warmup)), rounds: 5, callsPerRound: Math.min(10, Math.max(2, Math.ceil(warmup / 3))),
      signal: this.closing.signal,
    });
    if (this.closed) return 'wasm'; // unused: boot() stops here
    this.choice = chooseBackend(figures);
    // the WebGPU candidate put this process's WebAssembly on its baseline tier (runtime.ts
    // keepWasmOnBaselineTier); a CPU backend that won serves with the optimising tier back
    if (candidates.includes('webgpu') && this.choice.provider !== 'webgpu') allowWasmTierUp();
    this.log({ provider: this.choice.provider, figures: figures.map(({ provider, threads, ms_per_call, error }) => ({ provider, threads, ms_per_call, ...(error ? { error } : {}) })) }, `inference: ${this.choice.summary}`);
    return this.choice.provider;
  }

  private async boot(): Promise<void> {
    this.provider = await this.resolveProvider();
    if (this.closed) return;
    this.readinessEvents.check(); // the provider (and any note on it) is known
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
        this.readinessEvents.check();
        this.settle?.reject(e);
      },
    );
    // the pool's report channel holds the process open until the warm reports are in
    await done.finally(() => this.pool?.unrefReports());
  }

  private onReport(r: WorkerReport, workers: number): void {
    if (r.kind === 'metrics') {
      this.threadMetrics.set(r.worker, r.snapshot);
      return;
    }
    if (r.kind === 'provider') {
      if (r.provider !== this.provider) {
        this.log({ note: r.note }, 'inference: worker fell back');
        this.provider = r.provider;
        this.adapterNote = r.note;
        this.readinessEvents.check();
      }
      return;
    }
    if (r.kind === 'error') {
      const modules = r.module ? [r.module] : this.loadable;
      for (const id of modules) this.errors.set(id, r.message);
      this.log({ module: r.module, err: r.message }, 'inference: module failed to load');
      this.readinessEvents.check();
      this.settle?.reject(new Error(r.message));
      return;
    }
    const set = this.warm.get(r.module) ?? new Set<number>();
    set.add(r.worker);
    this.warm.set(r.module, set);
    this.log({ module: r.module, worker: r.worker, ms: Math.round(r.ms) }, 'inference: worker warm');
    this.readinessEvents.check();
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
        trained: this.manifest.trained,
        decision_policy: modes[0]?.decision_policy ?? '',
        threshold: modes[0]?.threshold ?? 0,
        execution_provider: this.provider,
        ...(this.executionNote() ? { execution_note: this.executionNote()! } : {}),
        error: this.errors.get(module_id) ?? null,
        modes,
      };
    });
  }

  /** Only the unusual is noted: a software GPU, WebGPU wanted (or a GPU present) but no
   * adapter, a pool thread's own WebGPU failure, or `auto` that could not use a CPU backend. */
  private executionNote(): string | null {
    const notes = [this.adapterNote];
    if (this.provider !== 'webgpu' && this.choice && this.choice.figures.some((f) => f.ms_per_call === null)) notes.push(this.choice.summary);
    return notes.filter((n) => n !== null).join('; ') || null;
  }

  poolTimes(): PoolTimes | null {
    return this.pool?.times ?? null;
  }

  poolMetrics(): unknown[][] {
    return [...this.threadMetrics.values()];
  }

  counters(): EngineCounters {
    return { ...this.counts };
  }

  async ping(): Promise<void> {
    if (!this.pool) throw new Error('inference engine is not started');
    await this.pool.run({ op: 'ping' });
  }

  async infer(job: InferenceJob, timing?: InferenceTiming): Promise<ResultRecord[]> {
    if (!this.pool) throw new Error('inference engine is not started');
    if (!this.loadable.includes(job.module_id)) {
      throw new Error(`${job.module_id} is not available: ${this.errors.get(job.module_id) ?? 'not enabled'}`);
    }
    for (const c of job.captures) policyFor(this.manifest, job.module_id, c.packet.mode);
    if (timing) timing.queued = epochNow();
    return Promise.all(job.captures.map((c) => this.enqueue(job.module_id, c, timing)));
  }

  private enqueue(module: ModuleId, capture: PreparedCapture, timing: InferenceTiming | undefined): Promise<ResultRecord> {
    return new Promise((resolve, reject) => {
      const mode = capture.packet.mode;
      const item = { capture, resolve, reject, timing };
      const open = mode === 'rgb_single'
        ? this.queue.find((g) => g.mode === mode && g.module === module && g.items.length < this.packSize)
        : undefined;
      if (open) open.items.push(item);
      else this.queue.push({ module, mode, items: [item] });
      this.schedulePump();
    });
  }

  // Deferred to the end of the current turn, so the captures of one call are all queued
  // (and packed) before the first task leaves.
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    const pool = this.pool;
    while (pool && this.inFlight < pool.workers && this.queue.length > 0) this.dispatch(pool, this.queue.shift()!);
  }

  private dispatch(pool: InferencePool, group: Group): void {
    const transfer: ArrayBuffer[] = [];
    let captures: PreparedCapture[];
    try {
      captures = group.items.map(({ capture }) => {
        const pixels = capture.pixels.map((px) => {
          if (!px) return null;
          if (isSharedPixels(px)) return px; // a frame-slab slot: read in place, never transferred
          const own = transferable(px);
          transfer.push(own.buffer as ArrayBuffer);
          return own;
        });
        return { packet: capture.packet, pixels };
      });
    } catch (e) {
      for (const it of group.items) it.reject(e as Error);
      return;
    }
    this.inFlight++;
    this.counts.tasks++;
    this.counts.captures += captures.length;
    const timings = new Set<InferenceTiming>();
    for (const it of group.items) if (it.timing) timings.add(it.timing);
    if (timings.size > 0) {
      const now = epochNow();
      for (const t of timings) {
        t.started ??= now;
        t.tasks = (t.tasks ?? 0) + 1;
      }
    }
    pool.run({ op: 'captures', module: group.module, mode: group.mode, captures }, transfer).then(
      (records) => {
        if (timings.size > 0) {
          const now = epochNow();
          for (const t of timings) t.ended = now;
        }
        group.items.forEach((it, i) => {
          const r = records[i];
          if (!r) it.reject(new Error(`inference worker returned no record for capture ${it.capture.packet.capture_id}`));
          else if ('error' in r) it.reject(new Error(r.error));
          else it.resolve(r);
        });
      },
      (err: Error) => {
        for (const it of group.items) it.reject(err);
      },
    ).finally(() => {
      this.inFlight--;
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort();
    for (const g of this.queue.splice(0)) for (const it of g.items) it.reject(new Error('inference engine closed'));
    this.settle?.reject(new Error('inference engine closed'));
    const pool = this.pool;
    this.pool = null;
    this.readinessEvents.check(); // nothing is ready on a closed engine
    if (pool && !(await pool.close())) this.log({}, 'inference: a pool thread did not release its sessions in time; terminated anyway');
    // `auto`'s measurement threads end before close() resolves: the process exits after it,
    // and exiting terminates whatever thread is still inside the native runtime (an abort).
    // Bounded like the pool's release: a measurement stuck in a graph that never returns
    // (what MODEL_LOAD_TIMEOUT_SECONDS ends) must not hold the close for ever.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.started?.catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, RELEASE_WAIT_MS)))]);
    clearTimeout(timer);
  }
}

export function createInferenceEngine(opts: EngineOptions): InferenceEngine {
  const manifest = loadManifest(join(opts.modelsDir, opts.modelSet));
  const enabled = opts.enabledModules ?? [...MODULE_IDS];
  return new Engine(manifest, opts, enabled);
}
