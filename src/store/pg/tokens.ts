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
    await c.query('INSERT INTO tokens (id, hash, record, created_at, name_key) VALUES ($1, $2, $3, $4, $5)', [token.id, token.hash, token, token.created_at, tokenNameKey(token.name)]);
  });
}

// A token's name key (tokenNameKey: NFC, then JavaScript's lower case) is stored beside its
// record (migration 6's name_key, indexed) and every lookup by name compares it, never
// PostgreSQL's lower(): that one depends on the database's character type and collation
// provider and Unicode version (C: ASCII only; ICU tr-TR: 'I' to dotless 'ı'; final sigma, 'İ',
// the letters of Unicode 16 and 17 read otherwise than Node's), and so let in names LMDB
// refuses. A row without a key (written by a node of an older build during a rolling upgrade,
// until the next start's migrate fills it: migrate.ts) is read too, and the key decides.

// A node of an older build still running beside this one (a rolling upgrade) writes no key:
// its new tokens have none, and this trigger takes the key of a token it renames away (that
// build changes the record alone), so the row is read as keyless, never by its old name's
// key, until a start fills it. This build says it wrote the key itself (lv.name_key_written,
// for its transaction: updateToken), so a rename of its own to a name of the same key keeps it.
export const TOKEN_NAME_KEY_RULES: readonly string[] = [`CREATE OR REPLACE FUNCTION lv_token_name_key_kept() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.record->>'name' IS DISTINCT FROM OLD.record->>'name'
     AND NEW.name_key IS NOT DISTINCT FROM OLD.name_key
     AND current_setting('lv.name_key_written', true) IS DISTINCT FROM 'on' THEN
    NEW.name_key := NULL;
  END IF;
  RETURN NEW;
END
$fn$`];

export const TOKEN_NAME_KEY_TRIGGER = {
  name: 'tokens_name_key_kept',
  table: 'tokens',
  sql: `CREATE OR REPLACE TRIGGER tokens_name_key_kept BEFORE UPDATE ON tokens
  FOR EACH ROW EXECUTE FUNCTION lv_token_name_key_kept()`,
} as const;

/** The tokens whose stored name key is `$1`, or that have none yet. */
export const TOKENS_NAMED = 'SELECT record FROM tokens WHERE name_key = $1 OR name_key IS NULL';

/** The tokens of `key` (tokenNameKey) among `rows`. */
export const ofKey = (rows: readonly object[], key: string): TokenRecord[] => rows.map((r) => (r as { record: TokenRecord }).record).filter((t) => tokenNameKey(t.name) === key);

/** The console's rule (token-names.ts): a new name may not match another token's, case and
 * Unicode composition ignored; duplicates that predate the rule stay. A transaction lock on
 * the name's key serialises two writers of one name on any node, without a unique index
 * that existing duplicates would break. */
export async function checkNewTokenName(c: pg.PoolClient, before: TokenRecord | undefined, after: TokenRecord) {
  const key = tokenNameKey(after.name);
  if (before && tokenNameKey(before.name) === key) return;
  await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`token-name:${key}`]);
  // by the stored key (above), as a search by name does (search.ts): PostgreSQL's lower() here
  // let 'οδος' in beside 'ΟΔΟΣ' and 'i̇zmir' beside 'İzmir', which LMDB refuses, refused
  // 'izmir' beside 'İzmir', which LMDB allows, and read every token to say so
  const named = ofKey((await c.query(TOKENS_NAMED, [key])).rows, key);
  if (named.some((t) => t.id !== after.id)) throw new DuplicateTokenNameError(after.name);
}

export async function updateToken(db: Pg, id: string, change: (t: TokenRecord) => TokenRecord) {
  return db.tx(async (c) => {
    const t = (await c.query('SELECT record FROM tokens WHERE id = $1 FOR UPDATE', [id])).rows[0]?.record as TokenRecord | undefined;
    if (!t) return undefined;
    const next = change(t);
    await checkNewTokenName(c, t, next);
    // the key is written here: TOKEN_NAME_KEY_TRIGGER leaves it (it empties the key of a
    // rename by an older build, which writes none)
    await c.query("SELECT set_config('lv.name_key_written', 'on', true)");
    await c.query('UPDATE tokens SET record = $2, name_key = $3 WHERE id = $1', [id, next, tokenNameKey(next.name)]);
    return next;
  });
}

/** Fills the name key of the tokens that have none (migration 6 adds it empty; a node of an
 * older build writes none), computed here, as only JavaScript's lower case is the key's. Run
 * by migrate, under its lock, in slices. */
export async function fillNameKeys(c: pg.PoolClient): Promise<number> {
  let filled = 0;
  // in id order from the last slice's end: a plain LIMIT read again, each slice, the rows the
  // slices before had keyed (their old versions, until a vacuum): 36 s for 320,000 tokens
  let after = '';
  for (;;) {
    const rows = (await c.query("SELECT id, record->>'name' AS name FROM tokens WHERE name_key IS NULL AND id > $1 ORDER BY id LIMIT 1000", [after])).rows as { id: string; name: string }[];
    if (rows.length === 0) return filled;
    after = rows[rows.length - 1]!.id;
    // a name that is not text (no record has one) keys as the empty string: never null again
    await c.query('UPDATE tokens SET name_key = k.key FROM unnest($1::text[], $2::text[]) AS k(id, key) WHERE tokens.id = k.id AND tokens.name_key IS NULL',
      [rows.map((r) => r.id), rows.map((r) => (typeof r.name === 'string' ? tokenNameKey(r.name) : ''))]);
    filled += rows.length;
  }
}
