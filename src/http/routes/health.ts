import { moduleEnabled } from '../../store/modules.ts';
import { storeHealthy } from '../../store/open.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { json } from '../respond.ts';

/** contract.md: live -> {status:"live"}; ready -> {status:"ready"|"not_ready", modules}.
 * Ready means the store answers and every enabled module's graphs are loaded and warm. */
export function healthRoutes(router: Router, s: Services): void {
  router.add('GET', '/health/live', () => json(200, { status: 'live' }));
  router.add('GET', '/health/ready', () => {
    const store = storeHealthy(s.store);
    const modules: Record<string, object> = {};
    let ready = store;
    for (const m of s.inference.readiness()) {
      const enabled = moduleEnabled(s.store, m.module_id);
      modules[m.module_id] = {
        enabled,
        ready: m.ready,
        model_set: m.model_set,
        execution_provider: m.execution_provider,
        ...(m.execution_note ? { execution_note: m.execution_note } : {}),
        ...(m.error ? { error: m.error } : {}),
      };
      if (enabled && !m.ready) ready = false;
    }
    return json(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', store: store ? 'ok' : 'unavailable', modules });
  });
}
