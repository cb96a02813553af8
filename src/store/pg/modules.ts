import type { ModuleId } from '../../contract/index.ts';
import type { Pg } from './open.ts';

export async function moduleEnabled(db: Pg, id: ModuleId) {
  const r = (await db.q('SELECT enabled FROM modules WHERE module_id = $1', [id])).rows[0];
  return r ? (r.enabled as boolean) : true;
}

export async function setModuleEnabled(db: Pg, id: ModuleId, enabled: boolean) {
  await db.q('INSERT INTO modules (module_id, enabled) VALUES ($1, $2) ON CONFLICT (module_id) DO UPDATE SET enabled = EXCLUDED.enabled', [id, enabled]);
}
