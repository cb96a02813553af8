import type { SearchPage, SearchQuery } from '../backend.ts';
import type { TokenRecord, UserRecord } from '../records.ts';
import { tokenNameKey } from '../token-rules.ts';
import type { Pg } from './open.ts';
import { listTokens, ofKey, TOKENS_NAMED } from './tokens.ts';
import { listUsers } from './users.ts';

const cmpPair = (a: readonly [string, string], b: readonly [string, string]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

// Token and user search read every record and page in JS with the same order and
// cursor as LMDB; correct, but O(tokens) per page (an indexed SQL query is still to do).
// With `name` the tokens of that name alone are read, through the index of migration 6.
export async function searchTokens(db: Pg, query: SearchQuery): Promise<SearchPage<TokenRecord>> {
  const needle = query.q === undefined ? undefined : tokenNameKey(query.q);
  const key = (t: TokenRecord): [string, string] => [tokenNameKey(t.name), t.id];
  const rows = (query.name === undefined ? await listTokens(db) : await tokensNamed(db, query.name))
    .filter((t) => needle === undefined || tokenNameKey(t.name).includes(needle) || t.token_prefix.startsWith(query.q!) || t.id.startsWith(query.q!))
    .map((t) => ({ t, k: key(t) }))
    .sort((a, b) => cmpPair(a.k, b.k))
    .filter((r) => !query.after || cmpPair(r.k, query.after) > 0);
  const items = rows.slice(0, query.limit).map((r) => r.t);
  return { items, next: rows.length > query.limit ? key(items[items.length - 1]!) : null };
}

/** Tokens whose name has the key of `name` (tokenNameKey), read through the index: few, as
 * names are unique, bar duplicates older than that rule. */
async function tokensNamed(db: Pg, name: string): Promise<TokenRecord[]> {
  const want = tokenNameKey(name);
  return ofKey((await db.q(TOKENS_NAMED, [want])).rows, want);
}

export async function searchUsers(db: Pg, query: SearchQuery): Promise<SearchPage<UserRecord>> {
  const needle = query.q?.toLowerCase();
  const rows = (await listUsers(db))
    .filter((u) => needle === undefined || u.username.toLowerCase().includes(needle) || u.id.startsWith(query.q!))
    .sort((a, b) => (a.username < b.username ? -1 : a.username > b.username ? 1 : 0))
    .filter((u) => !query.after || u.username > query.after[0]);
  const items = rows.slice(0, query.limit);
  const last = items[items.length - 1];
  return { items, next: rows.length > query.limit && last ? [last.username, last.id] : null };
}
