import { requireAdmin } from '../admin-guard.ts';
import { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { adminConsoleRoutes } from './admin-console.ts';
import { adminRoutes } from './admin.ts';
import { authRoutes } from './auth.ts';
import { businessRoutes } from './business.ts';
import { healthRoutes } from './health.ts';
import { jwksRoutes } from './jwks.ts';
import { metricsRoutes } from './metrics.ts';
import { modelSetRoutes } from './model-sets.ts';
import { openapiRoutes } from './openapi.ts';
import { rootRoutes } from './root.ts';
import { sessionRoutes } from './sessions.ts';
import { verifyRoutes } from './verify.ts';

export function buildRouter(s: Services): Router {
  // the one admin guard: Router.admin runs it before every /admin/api/ handler
  const router = new Router((ctx) => requireAdmin(ctx, s));
  healthRoutes(router, s);
  businessRoutes(router, s);
  verifyRoutes(router, s);
  sessionRoutes(router, s);
  metricsRoutes(router, s);
  openapiRoutes(router);
  rootRoutes(router);
  authRoutes(router, s);
  adminRoutes(router, s);
  modelSetRoutes(router, s);
  adminConsoleRoutes(router);
  jwksRoutes(router, s);
  return router;
}
