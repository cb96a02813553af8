import { buildOpenApi } from '../../openapi/index.ts';
import type { Router } from '../router.ts';

export function openapiRoutes(router: Router): void {
  // Built at the first request, not at start-up: building the document walks every schema
  // (~130-240 ms of CPU here), every API worker would pay it at each start, and most starts
  // never serve the document. The text is then kept; the document cannot change while the
  // process runs.
  let text: string | undefined;
  router.add('GET', '/openapi.json', () => ({ status: 200, body: (text ??= JSON.stringify(buildOpenApi())), contentType: 'application/json' }));
}
