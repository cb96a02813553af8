import { now } from '../../clock.ts';
import { listKeys, publicJwksOf, readCurrentKid, type KeyFile } from '../../signing/keys.ts';
import { SHARED_KEY_CACHE_MS, storeKeys } from '../../signing/source.ts';
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
  // shared keys (PostgreSQL): re-read from the database at most once per
  // SHARED_KEY_CACHE_MS, the same bound the signer keeps, so no node lags a rotation longer
  // than that. The store is looked at per request, not at registration, which reads nothing
  // of the services.
  let source: ReturnType<typeof storeKeys> | undefined;
  let shared: { keys: Promise<KeyFile[]>; readAt: number } | undefined;
  const sharedKeys = (): Promise<KeyFile[]> => {
    const t = Date.now();
    if (shared && t - shared.readAt < SHARED_KEY_CACHE_MS) return shared.keys;
    source ??= storeKeys(s.store);
    const previous = shared?.keys;
    // the database is away: serve the set this node last read (asked again after another
    // SHARED_KEY_CACHE_MS); with nothing read yet the error answers (503 server_busy)
    const read = { keys: source.list().catch((err) => (previous ? previous : Promise.reject(err))), readAt: t };
    read.keys.catch(() => {
      if (shared === read) shared = undefined;
    });
    shared = read;
    return read.keys;
  };
  router.add('GET', '/.well-known/jwks.json', async () => ({
    status: 200,
    body: publicJwksOf(s.store.kind === 'postgres' ? await sharedKeys() : keys(), now()),
  }));
}
