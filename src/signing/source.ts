import type { SigningKeys, StoreStatus } from '../store/index.ts';
import { ensureSigningKey, KID_PATTERN, listKeys, newKey, pruneRetiredKeys, RETIRED_DELETE_MS, revokeSigningKey, rotateSigningKey, UnknownSigningKeyError, type KeyFile, type KeyRevocation } from './keys.ts';

/** Where a node's verdict-signing keys live: DATA_DIR/keys files with the embedded store (one
 * host), the shared database with PostgreSQL (every node signs with the same key and
 * publishes the same JWKS). */
export interface KeySource {
  /** the current key, created on first use */
  current(at: number): Promise<KeyFile>;
  list(): Promise<KeyFile[]>;
  rotate(at: number): Promise<{ kid: string; retired: string | null; deleted: string[] }>;
  /** emergency revocation (keys.ts revokeSigningKey); UnknownSigningKeyError when no such key */
  revoke(kid: string, by: string, at: number): Promise<KeyRevocation>;
  /** deletes the keys retired RETIRED_DELETE_MS or longer before `at` (as a rotation does); their kids */
  prune(at: number): Promise<string[]>;
}

/** How long a node may keep using what it read from the database: a rotation is seen by
 * every node within this time (docs/several-nodes.md). */
export const SHARED_KEY_CACHE_MS = 10_000;

export function fileKeys(dataDir: string): KeySource {
  return {
    current: (at) => ensureSigningKey(dataDir, at),
    list: async () => listKeys(dataDir),
    rotate: (at) => rotateSigningKey(dataDir, at),
    revoke: (kid, by, at) => revokeSigningKey(dataDir, kid, by, at),
    prune: (at) => pruneRetiredKeys(dataDir, at),
  };
}

export function storeKeys(store: SigningKeys): KeySource {
  return {
    async current(at) {
      const found = (await store.listSigningKeys()).find((k) => k.retired_at === null);
      return found ?? store.createFirstSigningKey(await newKey(at));
    },
    list: () => store.listSigningKeys(),
    async rotate(at) {
      // the first rotation on a fresh database still has a key to retire, as with files
      await this.current(at);
      return store.rotateSigningKey(await newKey(at), at, at - RETIRED_DELETE_MS);
    },
    async revoke(kid, by, at) {
      // the replacement is made whether or not it is needed: deciding needs the lock the
      // store takes inside its transaction
      const done = KID_PATTERN.test(kid) ? await store.revokeSigningKey(kid, await newKey(at), at, by) : null;
      if (!done) throw new UnknownSigningKeyError(`no signing key ${JSON.stringify(kid)} in the database (keys list shows them)`);
      return done;
    },
    prune: (at) => store.deleteRetiredSigningKeys(at - RETIRED_DELETE_MS),
  };
}

export function keySourceFor(store: Pick<StoreStatus, 'kind'> & SigningKeys, dataDir: string): KeySource {
  return store.kind === 'postgres' ? storeKeys(store) : fileKeys(dataDir);
}
