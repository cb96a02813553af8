import type { SearchPage, SearchQuery } from '../backend.ts';
import type { TokenRecord, UserRecord } from '../records.ts';
import { tokenNameKey } from '../token-rules.ts';
import type { Pg } from './open.ts';
import { listTokens } from './tokens.ts';
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

// The index of migration 6 (the expression must stay its text, or the planner does not match
// it): PostgreSQL's fold of a name, with the two letters where it differs from tokenNameKey's
// made alike. lower() maps one character at a time; JavaScript's toLowerCase() applies
// Unicode's special casing too, so 'İ' (U+0130) is 'i' there and 'i' + U+0307 in the key, and
// a word's last 'Σ' is 'σ' there and 'ς' in the key. Both sides read 'ς' as 'σ' and 'i' +
// U+0307 as 'i', so a name is found however a database whose character type knows Unicode
// (C.UTF-8, en_US.UTF-8: deploy/container's is C.UTF-8) lowers it; the key then decides.
const fold = (text: string) => `replace(translate(lower(normalize(${text}, NFC)), U&'\\03C2', U&'\\03C3'), U&'i\\0307', 'i')`;
const foldKey = (key: string) => key.replaceAll('\u03c2', '\u03c3').replaceAll('i\u0307', 'i');

/** The tokens whose name's fold is the name's key's, or the name's own fold (in a database
 * whose character type is C, lower() changes ASCII letters only: the name as stored is still
 * found by its own spelling). */
export const TOKENS_NAMED = `SELECT record FROM tokens WHERE ${fold("record->>'name'")} IN ($1, ${fold('$2')})`;

/** Tokens whose name has the key of `name` (tokenNameKey), read through the index: few, as
 * names are unique, bar duplicates older than that rule. */
async function tokensNamed(db: Pg, name: string): Promise<TokenRecord[]> {
  const want = tokenNameKey(name);
  const rows = (await db.q(TOKENS_NAMED, [foldKey(want), name])).rows.map((r) => r.record as TokenRecord);
  return rows.filter((t) => tokenNameKey(t.name) === want);
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
