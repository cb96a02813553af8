import { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { businessRoutes } from './business.ts';
import { healthRoutes } from './health.ts';
import { metricsRoutes } from './metrics.ts';
import { openapiRoutes } from './openapi.ts';

export function buildRouter(s: Services): Router {
  const router = new Router();
  healthRoutes(router, s);
  businessRoutes(router, s);
  metricsRoutes(router, s);
  openapiRoutes(router);
  return router;
}
