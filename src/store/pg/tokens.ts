import type pg from 'pg';
import { DuplicateTokenNameError } from '../errors.ts';
import type { TokenRecord } from '../records.ts';
import { tokenNameKey } from '../token-rules.ts';
import type { Pg } from './open.ts';

export async function getToken(db: Pg, id: string) {
  return (await db.q('SELECT record FROM tokens WHERE id = $1', [id])).rows[0]?.record as TokenRecord | undefined;
}

export async function getTokenByHash(db: Pg, hash: string) {
  return (await db.q('SELECT record FROM tokens WHERE hash = $1', [hash])).rows[0]?.record as TokenRecord | undefined;
}

export async function listTokens(db: Pg) {
  return (await db.q('SELECT record FROM tokens ORDER BY created_at, id')).rows.map((r) => r.record as TokenRecord);
}

export async function insertToken(db: Pg, token: TokenRecord) {
  await db.tx(async (c) => {
    await checkNewTokenName(c, undefined, token);
    await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [token.id, token.hash, token, token.created_at]);
  });
}

// The index of migration 6 (the expression must stay its text, or the planner does not match
// it): PostgreSQL's fold of a name, with the two letters where it differs from tokenNameKey's
// made alike. lower() maps one character at a time; JavaScript's toLowerCase() applies
// Unicode's special casing too, so 'İ' (U+0130) is 'i' there and 'i' + U+0307 in the key, and
// a word's last 'Σ' is 'σ' there and 'ς' in the key. Both sides read 'ς' as 'σ' and 'i' +
// U+0307 as 'i', so a name is found however a database whose character type knows Unicode
// (C.UTF-8, en_US.UTF-8: deploy/container's is C.UTF-8) lowers it; the key then decides.
const fold = (text: string) => `replace(translate(lower(normalize(${text}, NFC)), U&'\\03C2', U&'\\03C3'), U&'i\\0307', 'i')`;
export const foldKey = (key: string) => key.replaceAll('\u03c2', '\u03c3').replaceAll('i\u0307', 'i');

/** The tokens whose name's fold is the name's key's, or the name's own fold (in a database
 * whose character type is C, lower() changes ASCII letters only: the name as stored is still
 * found by its own spelling). */
export const TOKENS_NAMED = `SELECT record FROM tokens WHERE ${fold("record->>'name'")} IN ($1, ${fold('$2')})`;

/** The console's rule (token-names.ts): a new name may not match another token's, case and
 * Unicode composition ignored; duplicates that predate the rule stay. A transaction lock on
 * the name's key serialises two writers of one name on any node, without a unique index
 * that existing duplicates would break. */
export async function checkNewTokenName(c: pg.PoolClient, before: TokenRecord | undefined, after: TokenRecord) {
  const key = tokenNameKey(after.name);
  if (before && tokenNameKey(before.name) === key) return;
  await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`token-name:${key}`]);
  // through migration 6's index, the key deciding, as a search by name does (search.ts): a
  // plain lower() here let 'οδος' in beside 'ΟΔΟΣ' and 'i̇zmir' beside 'İzmir', which LMDB
  // refuses, and read every token to say so
  const named = (await c.query(TOKENS_NAMED, [foldKey(key), after.name])).rows.map((r) => r.record as TokenRecord);
  if (named.some((t) => t.id !== after.id && tokenNameKey(t.name) === key)) throw new DuplicateTokenNameError(after.name);
}

export async function updateToken(db: Pg, id: string, change: (t: TokenRecord) => TokenRecord) {
  return db.tx(async (c) => {
    const t = (await c.query('SELECT record FROM tokens WHERE id = $1 FOR UPDATE', [id])).rows[0]?.record as TokenRecord | undefined;
    if (!t) return undefined;
    const next = change(t);
    await checkNewTokenName(c, t, next);
    await c.query('UPDATE tokens SET record = $2 WHERE id = $1', [id, next]);
    return next;
  });
}
