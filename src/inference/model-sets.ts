// Hot model-set change. The process serves one model set at a time through one engine;
// activating another loads and warms a second engine beside it (its graphs checked as at
// start), then swaps the reference calls read. A call takes the engine current when it
// starts and finishes on it, so in-flight calls end on the old set (their results carry
// its model_set); the old engine closes when its last call has finished. A set that fails
// to load, fails its graph checks, or would leave a module unready that the old set
// serves is refused, closed, and the old set keeps serving.
import { createInferenceEngine, type EngineCounters, type EngineOptions, type InferenceEngine } from './engine.ts';
import type { PoolTimes } from './pool.ts';
import { ReadinessEvents, type ReadinessListener } from './readiness-events.ts';
import type { ExecutionProvider, InferenceJob, ModuleReadiness, ResultRecord } from './types.ts';

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
  private activating: { modelSet: string; engine: InferenceEngine | null } | null = null;
  private last: Activation | null = null;
  private readonly retiring = new Set<Slot>();
  private closing = false;
  // Every engine this switch makes reports here; the check compares what the serving one
  // says, so a set warming beside it, or one closing after the switch, is never heard.
  private readonly readinessEvents = new ReadinessEvents(() => this.readiness());

  constructor(
    private readonly opts: EngineOptions,
    private readonly now: () => Date,
    private readonly create: (opts: EngineOptions) => InferenceEngine,
  ) {
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

  start(): Promise<void> {
    return this.current.engine.start();
  }

  readiness(): ModuleReadiness[] {
    return this.current.engine.readiness();
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

  async infer(job: InferenceJob): Promise<ResultRecord[]> {
    // read once: the whole call runs on the engine current at its start
    const slot = this.current;
    slot.inflight++;
    try {
      return await slot.engine.infer(job);
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
    const oldReady = old.engine.readiness().filter((m) => m.ready).map((m) => m.module_id);
    if (modelSet === old.modelSet && oldReady.length > 0) return this.done(modelSet, 'unchanged', null);
    this.activating = { modelSet, engine: null };
    try {
      let engine: InferenceEngine;
      try {
        engine = this.engine({ ...this.opts, modelSet });
      } catch (e) {
        return this.done(modelSet, 'refused', (e as Error).message);
      }
      this.activating.engine = engine;
      let failure: string | null = null;
      try {
        await engine.start();
      } catch (e) {
        failure = (e as Error).message;
      }
      const ready = engine.readiness();
      const lost = oldReady.filter((id) => !ready.find((m) => m.module_id === id)?.ready);
      if (!failure && lost.length > 0) {
        failure = lost.map((id) => `${id} would become unready: ${ready.find((m) => m.module_id === id)?.error ?? 'not ready'}`).join('; ');
      }
      if (failure !== null || this.closing) {
        await engine.close().catch(() => {});
        return this.done(modelSet, 'refused', failure ?? 'the inference engine is closing');
      }
      // the switch: one assignment; calls that started before keep their slot
      this.current = this.slot(engine, modelSet);
      this.readinessEvents.check();
      old.retired = true;
      this.retiring.add(old);
      if (old.inflight === 0) this.retire(old);
      return this.done(modelSet, 'active', null);
    } finally {
      this.activating = null;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.activating?.engine?.close().catch(() => {});
    await Promise.all([this.current.engine.close(), ...[...this.retiring].map((s) => s.engine.close().catch(() => {}))]);
  }
}

/** `create` is the engine factory (tests wrap it to hold calls in flight); `now` stamps
 * activations. */
export function createModelSetSwitch(
  opts: EngineOptions,
  { now = () => new Date(), create = createInferenceEngine }: { now?: () => Date; create?: (opts: EngineOptions) => InferenceEngine } = {},
): ModelSetSwitch {
  return new Switch(opts, now, create);
}
