import { now } from '../../clock.ts';
import { ensureSigningKey, publicJwks } from '../../signing/keys.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

/** GET /.well-known/jwks.json: public keys of verdict signatures. Read from disk on each call
 * (rare, small) so a rotation is visible at once on every worker. */
export function jwksRoutes(router: Router, s: Services): void {
  // created at first start rather than at the first verify, so the JWKS is never empty
  void ensureSigningKey(s.config.DATA_DIR, now()).catch((err: Error) => s.log.error({ err }, 'verdict signing key could not be created'));
  router.add('GET', '/.well-known/jwks.json', () => ({
    status: 200,
    body: publicJwks(s.config.DATA_DIR, now()),
  }));
}
