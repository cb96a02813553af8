import type { StoreBackend } from '../store/backend.ts';
import { ensureSigningKey, listKeys, newKey, RETIRED_DELETE_MS, rotateSigningKey, type KeyFile } from './keys.ts';

/** Where a node's verdict-signing keys live: DATA_DIR/keys files with the embedded store (one
 * host), the shared database with PostgreSQL (every node signs with the same key and
 * publishes the same JWKS). */
export interface KeySource {
  /** the current key, created on first use */
  current(at: number): Promise<KeyFile>;
  list(): Promise<KeyFile[]>;
  rotate(at: number): Promise<{ kid: string; retired: string | null; deleted: string[] }>;
}

/** How long a node may keep using what it read from the database: a rotation is seen by
 * every node within this time (README, Running several nodes). */
export const SHARED_KEY_CACHE_MS = 10_000;

export function fileKeys(dataDir: string): KeySource {
  return {
    current: (at) => ensureSigningKey(dataDir, at),
    list: async () => listKeys(dataDir),
    rotate: (at) => rotateSigningKey(dataDir, at),
  };
}

export function storeKeys(store: StoreBackend): KeySource {
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
  };
}

export function keySourceFor(store: StoreBackend, dataDir: string): KeySource {
  return store.kind === 'postgres' ? storeKeys(store) : fileKeys(dataDir);
}
