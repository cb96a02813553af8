import type { InferenceService } from '../inference/index.ts';
import { MODULE_IDS, type Mode, type ModuleId } from '../contract/index.ts';
import type { ModuleReads } from '../store/index.ts';

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
  /** the manifest's `trained` (false: random weights); null while the engine has not
   * reported, and when the serving set does not describe the module (it has no model then) */
  trained: boolean | null;
  decision_policy: string;
  /** 0 where decision_policy is '' (no policy): the console shows neither */
  threshold: number;
  execution_provider: string | null;
  error: string | null;
}

export function isModuleId(v: string): v is ModuleId {
  return (MODULE_IDS as readonly string[]).includes(v);
}

/** The operator switch from the store, readiness and model identity from the engine (an
 * engine still loading reports ready false). */
export async function moduleView(store: ModuleReads, inference: InferenceService, id: ModuleId, fallbackModelSet: string): Promise<ModuleView> {
  const r = inference.readiness().find((m) => m.module_id === id);
  // A set without this module (an imported rgb_liveness graph) still reports it, not ready:
  // its trained flag is the set's, and 0 its missing threshold. Shown as such, an operator
  // read "trained yes, threshold 0" for a module with no model at all (issue 39).
  const described = r !== undefined && (r.modes === undefined || r.modes.length > 0);
  return {
    module_id: id,
    enabled: await store.moduleEnabled(id),
    ready: r?.ready ?? false,
    modes: MODES[id],
    model_set: r?.model_set ?? fallbackModelSet,
    trained: described ? r.trained : null,
    decision_policy: described ? r.decision_policy : '',
    threshold: described ? r.threshold : 0,
    execution_provider: r?.execution_provider ?? null,
    error: r?.error ?? null,
  };
}

export function moduleViews(store: ModuleReads, inference: InferenceService, fallbackModelSet: string): Promise<ModuleView[]> {
  return Promise.all(MODULE_IDS.map((id) => moduleView(store, inference, id, fallbackModelSet)));
}
