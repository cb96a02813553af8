import t from 'tap';
import pg from 'pg';
import { DuplicateTokenNameError } from '../../src/store/errors.ts';
import { PgBackend } from '../../src/store/pg/index.ts';
import { TOKENS_NAMED } from '../../src/store/pg/tokens.ts';
import { tokenNameKey } from '../../src/store/token-rules.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { tokenRecord } from './contract.ts';

// Token names on PostgreSQL are compared by the key JavaScript computes (tokenNameKey), stored
// beside each record (migration 6), never by the database's lower(): whatever the database's
// character type or collation provider, the names one store refuses the other refuses too, and
// a lookup by name finds what LMDB's does (the store contract holds LMDB's answers).

const server = await startPostgres();
t.teardown(() => server.stop());

const admin = new pg.Client(server.url);
await admin.connect();
t.teardown(() => admin.end());

/** A database whose lower() knows ASCII letters only (character type C), as initdb makes under
 * LANG=C: PostgreSQL's own fold there misses every non-ASCII capital. */
async function cTypeDatabase(name: string): Promise<string> {
  await admin.query(`CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`);
  return server.url.replace(/\/[^/]+$/, `/${name}`);
}

const dup = (p: Promise<unknown>) => p.then(() => 'admitted', (e: unknown) => (e instanceof DuplicateTokenNameError ? 'refused' : String(e)));

// pairs of one key spelled two ways: the second must be refused beside the first, and found by
// a search for either; the last is not the first's key and must be admitted
const PAIRS: [string, string][] = [
  ['\u039f\u0394\u039f\u03a3', '\u03bf\u03b4\u03bf\u03c2'], // ΟΔΟΣ / οδος (final sigma)
  ['\u0130zmir', 'i\u0307zmir'], // İzmir / i + U+0307 zmir
  ['\u00c9quipe', '\u00e9quipe'], // Équipe / équipe (C: lower() leaves É)
  ['\ua7cb-1', '\u0264-1'], // Ɤ / ɤ (Unicode 16: PostgreSQL 17's tables differ from Node's)
  ['KIOSK-7', 'kiosk-7'],
];

for (const ctype of ['C.UTF-8', 'C'] as const) {
  t.test(`names compared by their key in a database of character type ${ctype}`, async (t) => {
    const url = ctype === 'C' ? await cTypeDatabase('lv_ctype_c') : await server.database('lv_ctype_utf8');
    const store = await PgBackend.open(url);
    t.teardown(() => store.close());
    for (const [first, second] of PAIRS) {
      t.equal(tokenNameKey(first), tokenNameKey(second), `${first} and ${second}: one key in JavaScript`);
      const a = tokenRecord([], { name: first });
      await store.insertToken(a);
      t.equal(await dup(store.insertToken(tokenRecord([], { name: second }))), 'refused', `${second} beside ${first}`);
      for (const spelling of [first, second]) {
        t.same((await store.searchTokens({ name: spelling, limit: 10 })).items.map((x) => x.id), [a.id], `found by ${spelling}`);
      }
    }
    t.equal(await dup(store.insertToken(tokenRecord([], { name: 'izmir' }))), 'admitted', 'izmir is not İzmir\'s key');
  });
}

t.test('a token written without a key (a node of an older build) is still compared, and keyed at the next start', async (t) => {
  const url = await server.database('lv_upgrade');
  let store = await PgBackend.open(url);
  const c = new pg.Client(url);
  await c.connect();
  t.teardown(() => c.end());
  // the row an older node writes: its record alone
  const old = tokenRecord([], { name: 'Lobby \u00c9ast' });
  await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [old.id, old.hash, old, old.created_at]);
  t.same((await store.searchTokens({ name: 'lobby \u00e9ast', limit: 10 })).items.map((x) => x.id), [old.id], 'found by name with no key');
  t.equal(await dup(store.insertToken(tokenRecord([], { name: 'LOBBY \u00c9AST' }))), 'refused', 'and its name is taken');
  await store.close();
  store = await PgBackend.open(url);
  t.teardown(() => store.close());
  t.same((await c.query('SELECT name_key FROM tokens WHERE id = $1', [old.id])).rows, [{ name_key: 'lobby \u00e9ast' }], 'keyed by the next start\'s migrate');
  t.same((await c.query('SELECT count(*)::int AS n FROM tokens WHERE name_key IS NULL')).rows, [{ n: 0 }], 'no token left without a key');
  // a rename by an older build (the record alone, as it writes it): the trigger takes the old
  // name's key away, so the token is read by its new name, never by its old one's key
  const other = tokenRecord([], { name: 'Alpha Desk' });
  await store.insertToken(other);
  await c.query('UPDATE tokens SET record = $2 WHERE id = $1', [other.id, { ...other, name: 'Beta Desk' }]);
  t.same((await c.query('SELECT name_key FROM tokens WHERE id = $1', [other.id])).rows, [{ name_key: null }], 'renamed by an older build: no key');
  t.same((await store.searchTokens({ name: 'beta desk', limit: 10 })).items.map((x) => x.id), [other.id], 'found by its new name');
  t.same((await store.searchTokens({ name: 'alpha desk', limit: 10 })).items, [], 'not by its old one');
  t.equal(await dup(store.insertToken(tokenRecord([], { name: 'BETA DESK' }))), 'refused', 'its new name is taken');
  t.equal(await dup(store.insertToken(tokenRecord([], { name: 'alpha desk' }))), 'admitted', 'its old name is free');
  // this build's own renames keep their key, one of the same key (case only) too
  await store.updateToken(other.id, (x) => ({ ...x, name: 'BETA desk' }));
  t.same((await c.query('SELECT name_key FROM tokens WHERE id = $1', [other.id])).rows, [{ name_key: 'beta desk' }], 'a rename of this build keeps the key it writes');
  await store.updateToken(other.id, (x) => ({ ...x, name: 'Beta Desk' }));
  t.same((await c.query('SELECT name_key FROM tokens WHERE id = $1', [other.id])).rows, [{ name_key: 'beta desk' }], 'and one to a name of the same key');
  // the planner is asked whether the key's index serves the lookup at all (a table this small
  // is read whole when that is cheaper)
  await c.query('SET enable_seqscan = off');
  const plan = JSON.stringify((await c.query(`EXPLAIN (FORMAT JSON) ${TOKENS_NAMED}`, ['x'])).rows);
  t.match(plan, /tokens_name_key/, 'the lookup reads the index');
  t.notMatch(plan, /Seq Scan/, 'not the table');
});
