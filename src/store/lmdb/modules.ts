import { lmdbWrite } from './atomic.ts';
import type { Store } from './open.ts';
import type { ModuleId } from '../../contract/index.ts';
import type { ModuleState } from '../records.ts';

// The spec's deployment enables both modules; an operator switch is stored only once made.
// LmdbBackend.moduleEnabled reads it at the latest commit (readLatest), so a switch made
// through another API worker holds for the next call.
export function moduleEnabled(store: Store, id: ModuleId): boolean {
  const state = store.db.modules.get(id);
  return state ? state.enabled : true;
}

export async function setModuleEnabled(store: Store, id: ModuleId, enabled: boolean): Promise<void> {
  await lmdbWrite(store, 'module', store.db.modules.put(id, { module_id: id, enabled } satisfies ModuleState));
}
