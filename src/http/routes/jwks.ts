import { now } from '../../clock.ts';
import { listKeys, publicJwksOf, readCurrentKid, type KeyFile } from '../../signing/keys.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

// The key files change only on rotation, which changes `current`: the list is re-read when
// that kid changes, checked at most once a second, instead of on every request. The signing
// key itself is created at start-up (src/startup.ts).
const CHECK_MS = 1000;

/** GET /.well-known/jwks.json: public keys of verdict signatures. */
export function jwksRoutes(router: Router, s: Services): void {
  let cache: { kid: string | undefined; keys: KeyFile[]; checkedAt: number } | undefined;
  const keys = (): KeyFile[] => {
    const t = Date.now();
    if (cache && t - cache.checkedAt < CHECK_MS) return cache.keys;
    const kid = readCurrentKid(s.config.DATA_DIR);
    if (!cache || cache.kid !== kid) cache = { kid, keys: listKeys(s.config.DATA_DIR), checkedAt: t };
    else cache.checkedAt = t;
    return cache.keys;
  };
  router.add('GET', '/.well-known/jwks.json', () => ({ status: 200, body: publicJwksOf(keys(), now()) }));
}
