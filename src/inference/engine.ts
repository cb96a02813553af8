// The inference engine: one per model set, in the main thread. It owns the pool (its start,
// its threads' reports, readiness, its close) and turns prepared captures into result records;
// API workers reach it over MessagePorts. Which backend the pool serves on is decided by
// backend-selection.ts, and how captures become pool tasks by scheduler.ts.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { MODULE_IDS, type ModuleId } from '../contract/index.ts';
import { BackendSelection, type BackendOptions } from './backend-selection.ts';
import { loadManifest, type Manifest } from './manifest.ts';
import { modePolicies, policyFor } from './modes/index.ts';
import { InferencePool, poolShape, RELEASE_WAIT_MS, type PoolTimes } from './pool.ts';
import type { WorkerReport } from './protocol.ts';
import { ReadinessEvents, type ReadinessListener } from './readiness-events.ts';
import { packSizeFor, TaskScheduler, type EngineCounters } from './scheduler.ts';
import type { ExecutionProvider, InferenceJob, InferenceService, InferenceTiming, ModuleReadiness, ResultRecord } from './types.ts';

export type { Backend } from './backend-selection.ts';
export type { EngineCounters } from './scheduler.ts';

export interface EngineOptions extends BackendOptions {
  modelsDir: string;
  modelSet: string;
  /** default: both modules */
  enabledModules?: ModuleId[];
  /** REQUIRE_TRAINED_MODELS: a set whose manifest says `trained: false` never reports ready */
  requireTrained?: boolean;
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

class Engine implements InferenceEngine {
  private pool: InferencePool | null = null;
  private readonly warm = new Map<ModuleId, Set<number>>();
  private readonly threadMetrics = new Map<number, unknown[]>();
  private readonly errors = new Map<ModuleId, string>();
  private readonly loadable: ModuleId[];
  private started: Promise<void> | null = null;
  private settle: { resolve: () => void; reject: (e: Error) => void } | null = null;
  private closed = false;
  /** ends `auto`'s start-up measurement early when the engine closes during it */
  private readonly closing = new AbortController();
  private readonly backend: BackendSelection;
  private readonly scheduler: TaskScheduler;
  private readonly readinessEvents = new ReadinessEvents(() => this.readiness());

  constructor(
    private readonly manifest: Manifest,
    private readonly opts: EngineOptions,
    private readonly enabled: ModuleId[],
  ) {
    this.loadable = enabled.filter((id) => manifest.modules[id] !== undefined);
    this.backend = new BackendSelection(opts, manifest, this.loadable, this.closing.signal);
    // the pool as it is when a task leaves: none before start and after close (tasks wait)
    this.scheduler = new TaskScheduler(packSizeFor(manifest), () => this.pool);
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
    return this.backend.executionProvider;
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

  private async boot(): Promise<void> {
    const provider = await this.backend.resolve();
    if (this.closed) return;
    this.readinessEvents.check(); // the provider (and any note on it) is known
    const cores = availableParallelism();
    const { workers, sessionThreads } = poolShape(this.opts.threads || cores, provider);
    this.log({ provider, workers, sessionThreads, modules: this.loadable }, 'inference: starting pool');
    if (this.loadable.length === 0) return;
    const done = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.pool = new InferencePool(
      {
        manifest: this.manifest,
        modules: this.loadable,
        provider,
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
      if (this.backend.fellBack(r.provider, r.note)) {
        this.log({ note: r.note }, 'inference: worker fell back');
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
        execution_provider: this.backend.provider,
        ...(this.backend.note() ? { execution_note: this.backend.note()! } : {}),
        error: this.errors.get(module_id) ?? null,
        modes,
      };
    });
  }

  poolTimes(): PoolTimes | null {
    return this.pool?.times ?? null;
  }

  poolMetrics(): unknown[][] {
    // A pool thread that ended (a native crash, a task that killed it) pushes no more: its last
    // figures, kept, were reported for ever beside its replacement's, under a `thread` label of
    // its own. Only the live threads' are kept.
    const live = this.pool?.threadIds();
    if (live) for (const id of this.threadMetrics.keys()) if (!live.has(id)) this.threadMetrics.delete(id);
    return [...this.threadMetrics.values()];
  }

  counters(): EngineCounters {
    return this.scheduler.counters();
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
    return this.scheduler.schedule(job.module_id, job.captures, timing);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.closing.abort();
    this.scheduler.rejectWaiting(new Error('inference engine closed'));
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
