import { atomically } from './atomic.ts';
import { TOKEN_NAME_INDEX_FLAG as BUILT, type Store } from './open.ts';
import { DuplicateTokenNameError } from '../errors.ts';
import type { TokenRecord } from '../records.ts';
import { tokenNameKey as nameKey } from '../token-rules.ts';

// Token name index: key [nameKey(name), token id] -> token_prefix. It serves two console
// needs without reading whole token records: name uniqueness (a write checks the key) and
// the paged, searchable token list (searchTokens in search.ts walks its keys in name
// order). It is derived data: built from the tokens db when a store has none yet.
//
// Port note (store interface): everything that reads or writes `tokensByName` is in this
// file and search.ts; in SQL it is a unique index on lower(normalize(name)) that
// tolerates the rows that predate it (see ensureTokenNameIndex).

/** Id of a token other than `exceptId` whose name has the same key, if any. A store written
 * before names were unique may hold several; any one of them makes the name taken. */
export function tokenNameHolder(store: Store, name: string, exceptId?: string): string | undefined {
  const key = nameKey(name);
  for (const k of store.db.tokensByName.getKeys({ start: [key] })) {
    const [n, id] = k as [string, string];
    if (n !== key) return undefined;
    if (id !== exceptId) return id;
  }
  return undefined;
}

/** Inside a write transaction: index a token's name, or move its entry on a rename. */
export function indexTokenName(store: Store, before: TokenRecord | undefined, after: TokenRecord): void {
  if (before && nameKey(before.name) !== nameKey(after.name)) void store.db.tokensByName.remove([nameKey(before.name), before.id]);
  void store.db.tokensByName.put([nameKey(after.name), after.id], after.token_prefix);
}

/** Inside a write transaction: refuse a new name another token holds. Only new names are
 * checked, so duplicates already in a store (written before the rule) stay readable,
 * changeable and revocable; the first rename of one of them must pick a free name. */
export function checkNewTokenName(store: Store, before: TokenRecord | undefined, after: TokenRecord): void {
  if (before && nameKey(before.name) === nameKey(after.name)) return;
  if (tokenNameHolder(store, after.name, after.id) !== undefined) throw new DuplicateTokenNameError(after.name);
}

/** Inside a write transaction: builds the index from the tokens db unless a meta flag says
 * it is complete. Flag and index change in the same transaction, so two processes opening
 * an older store at once build it once, and a token written meanwhile is in it either way. */
export function buildTokenNameIndex(store: Store): void {
  if (store.db.meta.get(BUILT) === true) return;
  for (const { value } of store.db.tokens.getRange({})) {
    const t = value;
    void store.db.tokensByName.put([nameKey(t.name), t.id], t.token_prefix);
  }
  void store.db.meta.put(BUILT, true);
}

/** For readers of the index: builds it first on a store that has none yet. */
export async function ensureTokenNameIndex(store: Store): Promise<void> {
  if (store.db.meta.get(BUILT) !== true) await atomically(store, () => buildTokenNameIndex(store));
}
