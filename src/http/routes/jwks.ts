import fs from 'node:fs';
import { now } from '../../clock.ts';
import { keysDir, listKeys, publicJwksOf, type KeyFile, storeKeys } from '../../signing/index.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

// Key files (one host): every change to DATA_DIR/keys (a rotation, an emergency revocation)
// replaces a file in it, which changes the folder's mtime, so one stat per request tells
// whether the list must be re-read and a revoked key leaves the JWKS with the next request.
// File times can be as coarse as a clock tick, so a change within the tick of the last read
// could go unseen: the list is also re-read when it is older than RECHECK_MS.
const RECHECK_MS = 1000;

/** How long a node serves the key set it read from the shared database (PostgreSQL). Shorter
 * than SHARED_KEY_CACHE_MS, the signer's bound: a revoked key leaves every node's JWKS within
 * this time (one small query per API worker per second at most), and a new key is published
 * no later than a signer starts using it. */
export const SHARED_JWKS_CACHE_MS = 1000;

/** GET /.well-known/jwks.json: public keys of verdict signatures. */
export function jwksRoutes(router: Router, s: Services): void {
  let cache: { mtimeNs: bigint | undefined; keys: KeyFile[]; readAt: number } | undefined;
  const keys = (): KeyFile[] => {
    const t = Date.now();
    const mtimeNs = fs.statSync(keysDir(s.config.DATA_DIR), { bigint: true, throwIfNoEntry: false })?.mtimeNs;
    if (!cache || cache.mtimeNs !== mtimeNs || t - cache.readAt >= RECHECK_MS) cache = { mtimeNs, keys: listKeys(s.config.DATA_DIR), readAt: t };
    return cache.keys;
  };
  // shared keys (PostgreSQL): re-read from the database at most once per
  // SHARED_JWKS_CACHE_MS. The store is looked at per request, not at registration, which
  // reads nothing of the services.
  let source: ReturnType<typeof storeKeys> | undefined;
  let shared: { keys: Promise<KeyFile[]>; readAt: number } | undefined;
  const sharedKeys = (): Promise<KeyFile[]> => {
    const t = Date.now();
    if (shared && t - shared.readAt < SHARED_JWKS_CACHE_MS) return shared.keys;
    source ??= storeKeys(s.store);
    const previous = shared?.keys;
    // the database is away: serve the set this node last read (asked again after another
    // SHARED_JWKS_CACHE_MS); with nothing read yet the error answers (503 server_busy)
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
