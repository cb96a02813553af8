// Hot model-set change. The process serves one model set at a time through one engine;
// activating another loads and warms a second engine beside it (its graphs checked as at
// start), then swaps the reference calls read. A call takes the engine current when it
// starts and finishes on it, so in-flight calls end on the old set (their results carry
// its model_set); the old engine closes when its last call has finished. A set that fails
// to load, fails its graph checks, or would leave a module unready that the old set
// serves (or is warming up to serve) is refused, closed, and the old set keeps serving; under
// REQUIRE_TRAINED_MODELS an untrained set is refused before it loads.
//
// Only modules the operator has enabled count: a disabled module answers 403 module_disabled
// whatever the set, so a set that does not describe it can be activated (the README's deploy
// path: an imported rgb_liveness graph, with color_liveness disabled first). A set that does
// not describe an enabled, served module is refused with that remedy named, not activated
// with a warning: its module would turn unready, every call to it a 503, and /health/ready
// (which counts enabled modules) a 503 that takes the node out of its load balancer.
//
// Load, checks and warm-up are bounded in time (loadTimeoutMs, MODEL_LOAD_TIMEOUT_SECONDS): a
// graph that never finishes must not hold the switch for ever. Past the bound the set is
// refused with that reason and its engine closed; at start the modules stay unready with it.
import { join } from 'node:path';
import type { ModuleId } from '../contract/index.ts';
import { loadManifest } from './manifest.ts';
import { createInferenceEngine, type EngineCounters, type EngineOptions, type InferenceEngine } from './engine.ts';
import type { PoolTimes } from './pool.ts';
import { ReadinessEvents, type ReadinessListener } from './readiness-events.ts';
import type { ExecutionProvider, InferenceJob, InferenceTiming, ModuleReadiness, ResultRecord } from './types.ts';

/** Default bound on load, checks and warm-up (MODEL_LOAD_TIMEOUT_SECONDS). */
export const DEFAULT_LOAD_TIMEOUT_MS = 600_000;

export interface SwitchOptions {
  now?: () => Date;
  create?: (opts: EngineOptions) => InferenceEngine;
  /** the operator's module switch (the store's); default: every module enabled. A read that
   * fails counts as enabled, the careful side. */
  moduleEnabled?: (id: ModuleId) => Promise<boolean> | boolean;
  /** bound on an engine's start (load, checks, `auto`'s measurement, warm-up) */
  loadTimeoutMs?: number;
}

/** Rejects with the bound's reason when `work` has not settled within `ms`. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LoadTimeoutError(
      `load, graph checks and warm-up did not finish within ${Math.round(ms / 100) / 10} s (MODEL_LOAD_TIMEOUT_SECONDS): a graph that never finishes, or a host too slow for this set`,
    )), ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

class LoadTimeoutError extends Error {
  override name = 'LoadTimeoutError';
}

export interface Activation {
  model_set: string;
  outcome: 'active' | 'unchanged' | 'refused';
  /** why a set was refused; null otherwise */
  reason: string | null;
  at: string;
}

export interface ModelSetStatus {
  /** the set serving calls now */
  active: string;
  /** a set being loaded and warmed beside it, if any */
  activating: string | null;
  last: Activation | null;
}

/** Not an HTTP error: an activation requested while another runs or the engine closes; the
 * request is recorded as refused in the model-set state that the admin API and CLI read. */
export class ActivationBusyError extends Error {
  override name = 'ActivationBusyError';
}

interface Slot {
  engine: InferenceEngine;
  modelSet: string;
  inflight: number;
  retired: boolean;
  closed: Promise<void> | null;
}

export interface ModelSetSwitch extends InferenceEngine {
  activate(modelSet: string): Promise<Activation>;
  status(): ModelSetStatus;
}

class Switch implements ModelSetSwitch {
  private current: Slot;
  /** why the engine this switch started with gave up (its start ran past the bound): its
   * modules show it as their error until another set is activated */
  private startFailure: string | null = null;
  /** refused engines still closing (a pool thread leaves only once its runtime call returns) */
  private readonly discarding = new Set<Promise<void>>();
  private activating: { modelSet: string; engine: InferenceEngine | null } | null = null;
  private last: Activation | null = null;
  private readonly retiring = new Set<Slot>();
  private closing = false;
  // Every engine this switch makes reports here; the check compares what the serving one
  // says, so a set warming beside it, or one closing after the switch, is never heard.
  private readonly readinessEvents = new ReadinessEvents(() => this.readiness());

  private readonly now: () => Date;
  private readonly create: (opts: EngineOptions) => InferenceEngine;
  private readonly loadTimeoutMs: number;

  constructor(
    private readonly opts: EngineOptions,
    private readonly switchOpts: SwitchOptions,
  ) {
    this.now = switchOpts.now ?? (() => new Date());
    this.create = switchOpts.create ?? createInferenceEngine;
    this.loadTimeoutMs = switchOpts.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS;
    this.current = this.slot(this.engine(opts), opts.modelSet);
  }

  private engine(opts: EngineOptions): InferenceEngine {
    const engine = this.create(opts);
    engine.onReadinessChange(() => this.readinessEvents.check());
    return engine;
  }

  private slot(engine: InferenceEngine, modelSet: string): Slot {
    return { engine, modelSet, inflight: 0, retired: false, closed: null };
  }

  get executionProvider(): ExecutionProvider {
    return this.current.engine.executionProvider;
  }

  async start(): Promise<void> {
    const slot = this.current;
    try {
      await within(slot.engine.start(), this.loadTimeoutMs);
    } catch (e) {
      if (e instanceof LoadTimeoutError && this.current === slot && !this.closing) {
        this.startFailure = `model set ${slot.modelSet}: ${e.message}`;
        this.opts.log?.({ model_set: slot.modelSet, reason: this.startFailure }, 'model set refused at start: its modules stay unready');
        this.discard(slot.engine);
        this.readinessEvents.check();
      }
      throw e;
    }
  }

  readiness(): ModuleReadiness[] {
    const modules = this.current.engine.readiness();
    const failure = this.startFailure;
    return failure === null ? modules : modules.map((m) => ({ ...m, ready: false, error: failure }));
  }

  /** Closes an engine that will not serve, without holding the caller: a pool thread inside a
   * runtime call leaves only once that call returns (workers/inference.ts). close() waits. */
  private discard(engine: InferenceEngine): void {
    const closing: Promise<void> = engine.close().catch(() => {}).finally(() => this.discarding.delete(closing));
    this.discarding.add(closing);
  }

  /** The modules a set serves (ready) or is about to serve (warming up: not ready, and no
   * error). One that cannot serve (a module its manifest lacks, an untrained set under
   * REQUIRE_TRAINED_MODELS, a start that failed or overran its bound) is not counted: switching
   * away from it is how an operator gets out of that. */
  private servedBy(readiness: ModuleReadiness[]): ModuleId[] {
    return readiness.filter((m) => m.ready || m.error === null).map((m) => m.module_id);
  }

  /** Why `modelSet` may not be switched to under REQUIRE_TRAINED_MODELS; null when it may (a
   * manifest that does not load is the engine's to refuse, with its own reason). */
  private untrained(modelSet: string): string | null {
    if (!this.opts.requireTrained) return null;
    try {
      if (loadManifest(join(this.opts.modelsDir, modelSet)).trained) return null;
    } catch {
      return null;
    }
    return `model set ${modelSet} is untrained (its manifest says trained: false) and REQUIRE_TRAINED_MODELS is set: it cannot be switched to`;
  }

  /** The modules the operator has enabled, of `ids`; a failed read counts as enabled. */
  private async enabledOf(ids: ModuleId[]): Promise<ModuleId[]> {
    const ask = this.switchOpts.moduleEnabled;
    if (!ask) return ids;
    const on = await Promise.all(ids.map(async (id) => {
      try {
        return await ask(id);
      } catch {
        return true;
      }
    }));
    return ids.filter((_, i) => on[i]);
  }

  onReadinessChange(listener: ReadinessListener): () => void {
    return this.readinessEvents.listen(listener);
  }

  /** the serving set's pool figures (a set being activated has not served yet) */
  poolTimes(): PoolTimes | null {
    return this.current.engine.poolTimes();
  }

  /** the serving set's pool threads (a set being activated joins once it serves) */
  poolMetrics(): unknown[][] {
    return this.current.engine.poolMetrics();
  }

  ping(): Promise<void> {
    return this.current.engine.ping();
  }

  /** the serving set's task counters */
  counters(): EngineCounters {
    return this.current.engine.counters();
  }

  status(): ModelSetStatus {
    return { active: this.current.modelSet, activating: this.activating?.modelSet ?? null, last: this.last };
  }

  async infer(job: InferenceJob, timing?: InferenceTiming): Promise<ResultRecord[]> {
    // read once: the whole call runs on the engine current at its start
    const slot = this.current;
    slot.inflight++;
    try {
      return await slot.engine.infer(job, timing);
    } finally {
      slot.inflight--;
      if (slot.retired && slot.inflight === 0) this.retire(slot);
    }
  }

  private retire(slot: Slot): void {
    slot.closed ??= slot.engine.close().catch(() => {}).finally(() => this.retiring.delete(slot));
  }

  private done(modelSet: string, outcome: Activation['outcome'], reason: string | null): Activation {
    this.last = { model_set: modelSet, outcome, reason, at: this.now().toISOString() };
    this.opts.log?.({ model_set: modelSet, outcome, reason }, `model set ${outcome}`);
    return this.last;
  }

  async activate(modelSet: string): Promise<Activation> {
    if (this.closing) throw new ActivationBusyError('the inference engine is closing');
    if (this.activating) throw new ActivationBusyError(`model set ${this.activating.modelSet} is being activated`);
    const old = this.current;
    this.activating = { modelSet, engine: null };
    try {
      // what the serving set serves, or is about to serve, that the operator has enabled: only
      // that may not be lost (a disabled module answers 403 module_disabled on any set). "About
      // to": the modules still warming up count too; counting the ready ones alone let a switch
      // made during the warm-up drop an enabled module for good (nothing was ready yet, so
      // nothing could be lost)
      const oldReady = await this.enabledOf(this.servedBy(this.readiness()));
      if (modelSet === old.modelSet && this.startFailure === null && old.engine.readiness().some((m) => m.ready)) return this.done(modelSet, 'unchanged', null);
      if (this.closing) return this.done(modelSet, 'refused', 'the inference engine is closing');
      // REQUIRE_TRAINED_MODELS: such a set can neither serve nor be switched to, whatever is
      // enabled (its modules would be unready, and enabling one later would find it so)
      const untrained = this.untrained(modelSet);
      if (untrained) return this.done(modelSet, 'refused', untrained);
      let engine: InferenceEngine;
      try {
        engine = this.engine({ ...this.opts, modelSet });
      } catch (e) {
        return this.done(modelSet, 'refused', (e as Error).message);
      }
      this.activating.engine = engine;
      let failure: string | null = null;
      try {
        await within(engine.start(), this.loadTimeoutMs);
      } catch (e) {
        failure = (e as Error).message;
      }
      const ready = engine.readiness();
      const lost = oldReady.filter((id) => !ready.find((m) => m.module_id === id)?.ready);
      if (!failure && lost.length > 0) failure = lost.map((id) => this.lossReason(id, modelSet, old.modelSet, ready)).join('; ');
      if (failure !== null || this.closing) {
        this.discard(engine);
        return this.done(modelSet, 'refused', failure ?? 'the inference engine is closing');
      }
      // the switch: one assignment; calls that started before keep their slot
      this.current = this.slot(engine, modelSet);
      this.startFailure = null;
      this.readinessEvents.check();
      old.retired = true;
      this.retiring.add(old);
      if (old.inflight === 0) this.retire(old);
      return this.done(modelSet, 'active', null);
    } finally {
      this.activating = null;
    }
  }

  /** Why activating `modelSet` would leave `id` (enabled, served by `serving`) unready, with
   * the remedy that works. */
  private lossReason(id: ModuleId, modelSet: string, serving: string, ready: ModuleReadiness[]): string {
    const entry = ready.find((m) => m.module_id === id);
    let described = true;
    try {
      described = loadManifest(join(this.opts.modelsDir, modelSet)).modules[id] !== undefined;
    } catch {
      // the engine loaded it a moment ago; a manifest changed since is the engine's word
    }
    if (!described) {
      return `model set ${modelSet} does not describe ${id}, which is enabled and served by ${serving}: disable it first `
        + `(npm run cli -- module disable ${id}, or the console's Modules tab; its verify calls then answer 403 module_disabled and charge nothing) `
        + `and activate again, or describe ${id} in ${modelSet}'s manifest`;
    }
    return `${id} would become unready: ${entry?.error ?? 'not ready'}`;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.activating?.engine?.close().catch(() => {});
    await Promise.all([this.current.engine.close(), ...[...this.retiring].map((s) => s.engine.close().catch(() => {})), ...this.discarding]);
  }
}

/** `create` is the engine factory (tests wrap it to hold calls in flight); `now` stamps
 * activations. */
export function createModelSetSwitch(opts: EngineOptions, switchOpts: SwitchOptions = {}): ModelSetSwitch {
  return new Switch(opts, switchOpts);
}
