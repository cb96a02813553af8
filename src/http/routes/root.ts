import { SERVICE_VERSION } from '../../version.ts';
import { json } from '../respond.ts';
import type { Router } from '../router.ts';

/** GET /: the URL the `listening` line prints, and what a person opens first. It was a 404
 * (issue 39); it now says where things are. JSON, as every other answer of the API is (a
 * browser shows it as text): nothing secret, nothing that depends on the caller or the store,
 * so it is public and answers even while the store is down. */
export const ROOT_ANSWER = {
  service: 'liveness verification service',
  version: SERVICE_VERSION,
  console: '/admin',
  openapi: '/openapi.json',
  health: '/health/ready',
  docs: 'README.md and docs/ in the service\'s source; docs/endpoints.md lists every endpoint',
} as const;

export function rootRoutes(router: Router): void {
  router.add('GET', '/', () => json(200, ROOT_ANSWER));
}
