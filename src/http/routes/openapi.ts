import { buildOpenApi } from '../../openapi/index.ts';
import type { Router } from '../router.ts';

export function openapiRoutes(router: Router): void {
  const text = JSON.stringify(buildOpenApi());
  router.add('GET', '/openapi.json', () => ({ status: 200, body: text, contentType: 'application/json' }));
}
