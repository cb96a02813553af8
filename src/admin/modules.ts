import type { InferenceService } from '../inference/index.ts';
import { MODULE_IDS, type Mode, type ModuleId } from '../contract/index.ts';
import type { StoreBackend } from '../store/index.ts';

// interface-spec.md, module table.
const MODES: Record<ModuleId, Mode[]> = {
  rgb_liveness: ['rgb_single', 'rgb_sequence'],
  color_liveness: ['color'],
};

export interface ModuleView {
  module_id: ModuleId;
  enabled: boolean;
  ready: boolean;
  modes: Mode[];
  model_set: string;
  /** the manifest's `trained` (false: random weights; null while the engine is not known) */
  trained: boolean | null;
  decision_policy: string;
  threshold: number;
  execution_provider: string | null;
  error: string | null;
}

export function isModuleId(v: string): v is ModuleId {
  return (MODULE_IDS as readonly string[]).includes(v);
}

/** The operator switch from the store, readiness and model identity from the engine (an
 * engine still loading reports ready false). */
export async function moduleView(store: StoreBackend, inference: InferenceService, id: ModuleId, fallbackModelSet: string): Promise<ModuleView> {
  const r = inference.readiness().find((m) => m.module_id === id);
  return {
    module_id: id,
    enabled: await store.moduleEnabled(id),
    ready: r?.ready ?? false,
    modes: MODES[id],
    model_set: r?.model_set ?? fallbackModelSet,
    trained: r?.trained ?? null,
    decision_policy: r?.decision_policy ?? '',
    threshold: r?.threshold ?? 0,
    execution_provider: r?.execution_provider ?? null,
    error: r?.error ?? null,
  };
}

export function moduleViews(store: StoreBackend, inference: InferenceService, fallbackModelSet: string): Promise<ModuleView[]> {
  return Promise.all(MODULE_IDS.map((id) => moduleView(store, inference, id, fallbackModelSet)));
}
