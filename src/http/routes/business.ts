import { authenticateBearer } from '../../auth/business-token.ts';
import { now } from '../../clock.ts';
import { usageSnapshot } from '../../metering/usage.ts';
import { moduleEnabled } from '../../store/modules.ts';
import type { TokenRecord } from '../../store/records.ts';
import type { HttpContext } from '../context.ts';
import { json } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

export function requireToken(ctx: HttpContext, s: Services): TokenRecord {
  return authenticateBearer(s.store, ctx.headers['authorization'], now());
}

export type ModuleStatus = 'available' | 'disabled' | 'unavailable';

export function moduleStatus(s: Services, moduleId: string): ModuleStatus {
  if (!moduleEnabled(s.store, moduleId as never)) return 'disabled';
  const r = s.inference.readiness().find((m) => m.module_id === moduleId);
  return r && r.ready ? 'available' : 'unavailable';
}

/** GET /v1/me and /v1/modules: read-only, never metered. */
export function businessRoutes(router: Router, s: Services): void {
  router.add('GET', '/v1/me', (ctx) => {
    const at = now();
    const token = authenticateBearer(s.store, ctx.headers['authorization'], at);
    return json(200, {
      token: { id: token.id, name: token.name, expires_at: token.expires_at, demo: token.demo },
      usage: usageSnapshot(s.store, token, at),
    });
  });
  router.add('GET', '/v1/modules', (ctx) => {
    const token = requireToken(ctx, s);
    return json(200, { modules: token.grants.map((g) => ({ module_id: g.module_id, status: moduleStatus(s, g.module_id) })) });
  });
}
