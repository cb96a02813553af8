import { atomically } from './atomic.ts';
import { readLatest, type Store } from './open.ts';
import type { TokenRecord } from '../records.ts';
import { buildTokenNameIndex, checkNewTokenName, indexTokenName } from './token-names.ts';

export function getToken(store: Store, id: string): TokenRecord | undefined {
  readLatest(store);
  return store.db.tokens.get(id);
}

/** Every bearer call's token, read at the latest commit: an operator's change made through
 * another API worker (a token enabled, disabled, expired) holds for the very next call. A
 * snapshot kept for the rest of lmdb-js's timer tick answered /v1/me 401 right after a
 * re-enable had been answered 200 (seen once in CI); the reset costs about 0.5 us a read. */
export function getTokenByHash(store: Store, hash: string): TokenRecord | undefined {
  readLatest(store);
  const id = store.db.tokenHashes.get(hash);
  return id === undefined ? undefined : store.db.tokens.get(id);
}

export function listTokens(store: Store): TokenRecord[] {
  readLatest(store);
  return [...store.db.tokens.getRange({})].map((e) => e.value).sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Throws DuplicateTokenNameError (nothing written) when another token has the name. */
export async function insertToken(store: Store, token: TokenRecord): Promise<void> {
  await atomically(store, () => {
    buildTokenNameIndex(store);
    checkNewTokenName(store, undefined, token);
    indexTokenName(store, undefined, token);
    void store.db.tokenHashes.put(token.hash, token.id);
    void store.db.tokens.put(token.id, token);
  });
}

/** Read-modify-write of one token inside a write transaction, so concurrent operators
 * (admin API on any worker, CLI) never lose each other's changes. A rename to a name another
 * token has throws DuplicateTokenNameError and changes nothing. */
export async function updateToken(store: Store, id: string, change: (t: TokenRecord) => TokenRecord): Promise<TokenRecord | undefined> {
  return atomically(store, () => {
    const token = store.db.tokens.get(id);
    if (!token) return undefined;
    const next = change(token);
    if (next.name !== token.name) {
      buildTokenNameIndex(store);
      checkNewTokenName(store, token, next);
    }
    indexTokenName(store, token, next);
    void store.db.tokens.put(id, next);
    return next;
  });
}
