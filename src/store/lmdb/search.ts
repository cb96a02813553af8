import type { Store } from './open.ts';
import type { TokenRecord, UserRecord } from '../records.ts';
import type { SearchPage, SearchQuery } from '../backend.ts';
import { tokenNameKey as nameKey } from '../token-rules.ts';
import { ensureTokenNameIndex } from './token-names.ts';

// Paged search over tokens and users for the console. Both walk a name-ordered index
// (tokensByName, usersByName) reading keys and small values only; whole records are read for
// the page's rows alone, so a page costs the same with 50 tokens or 50,000.
//
// Port note (store interface): searchTokens and searchUsers are the queries to port; in SQL,
// `WHERE lower(name) LIKE '%q%' OR token_prefix LIKE 'q%' OR id LIKE 'q%' ORDER BY
// lower(name), id` with a keyset cursor; `name` is `WHERE lower(name) = lower($name)` on an
// index of that expression.

export async function searchTokens(store: Store, query: SearchQuery): Promise<SearchPage<TokenRecord>> {
  await ensureTokenNameIndex(store);
  const needle = query.q === undefined ? undefined : nameKey(query.q);
  // `name`: the index's entries of that one key, read from its first, so the page costs the
  // same however many tokens there are or contain the name. A cursor of another key (not one
  // this query returned) lies before all of them or after all of them.
  const exact = query.name === undefined ? undefined : nameKey(query.name);
  if (exact !== undefined && query.after && query.after[0] > exact) return { items: [], next: null };
  const after = exact !== undefined && query.after?.[0] !== exact ? undefined : query.after;
  const start = after ?? (exact !== undefined ? [exact] : undefined);
  const items: TokenRecord[] = [];
  const range = store.db.tokensByName.getRange(start ? { start } : {});
  for (const { key, value } of range) {
    const [name, id] = key as [string, string];
    if (exact !== undefined && name !== exact) break;
    if (after && name === after[0] && id === after[1]) continue;
    if (query.q !== undefined && !(name.includes(needle!) || value.startsWith(query.q) || id.startsWith(query.q))) continue;
    if (items.length === query.limit) return { items, next: lastKey(items) };
    const t = store.db.tokens.get(id);
    if (t) items.push(t);
  }
  return { items, next: null };
}

function lastKey(items: TokenRecord[]): [string, string] {
  const t = items[items.length - 1]!;
  return [nameKey(t.name), t.id];
}

/** Users in username order (usernames are unique and ASCII), `q` matching the username
 * (substring, ignoring case) or the id (from its start). */
export function searchUsers(store: Store, query: SearchQuery): SearchPage<UserRecord> {
  const needle = query.q?.toLowerCase();
  const items: UserRecord[] = [];
  const range = store.db.usersByName.getRange(query.after ? { start: query.after[0] } : {});
  for (const { key, value } of range) {
    const username = key as string;
    const id = value;
    if (query.after && username === query.after[0]) continue;
    if (needle !== undefined && !(username.toLowerCase().includes(needle) || id.startsWith(query.q!))) continue;
    if (items.length === query.limit) {
      const last = items[items.length - 1]!;
      return { items, next: [last.username, last.id] };
    }
    const u = store.db.users.get(id);
    if (u) items.push(u);
  }
  return { items, next: null };
}
