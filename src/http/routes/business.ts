import { authenticateCaller, requireBusinessToken, sentSessionToken } from '../../auth/index.ts';
import { ServiceError } from '../../errors/index.ts';
import { now } from '../../clock.ts';
import { sessionMe, withinToken } from '../../sessions/index.ts';
import type { TokenRecord } from '../../store/index.ts';
import type { HttpContext } from '../context.ts';
import { json } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

export function requireToken(ctx: HttpContext, s: Services): Promise<TokenRecord> {
  return requireBusinessToken(s.store, ctx.headers['authorization'], now());
}

export type ModuleStatus = 'available' | 'disabled' | 'unavailable';

export async function moduleStatus(s: Services, moduleId: string): Promise<ModuleStatus> {
  if (!(await s.store.moduleEnabled(moduleId as never))) return 'disabled';
  const r = s.inference.readiness().find((m) => m.module_id === moduleId);
  return r && r.ready ? 'available' : 'unavailable';
}

/** GET /v1/me and /v1/modules: read-only, never metered. */
export function businessRoutes(router: Router, s: Services): void {
  router.add('GET', '/v1/me', async (ctx) => {
    const at = now();
    const caller = await authenticateCaller(s.store, ctx.headers['authorization'], at).catch((err: unknown) => {
      // a dead or unknown session token still counts as a session's call, with its refusal
      if (sentSessionToken(ctx.headers['authorization'])) s.metrics.sessionCalls.inc({ call: 'me', status: String(err instanceof ServiceError ? err.status : 500) });
      throw err;
    });
    const { token, session } = caller;
    if (session) {
      s.metrics.sessionCalls.inc({ call: 'me', status: '200' });
      return json(200, sessionMe(withinToken(session, token), at));
    }
    return json(200, {
      token: { id: token.id, name: token.name, expires_at: token.expires_at, demo: token.demo },
      usage: await s.store.usageSnapshot(token, at),
    });
  });
  router.add('GET', '/v1/modules', async (ctx) => {
    const token = await requireToken(ctx, s);
    const modules = [];
    for (const g of token.grants) modules.push({ module_id: g.module_id, status: await moduleStatus(s, g.module_id) });
    return json(200, { modules });
  });
}
