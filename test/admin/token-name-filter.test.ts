import t, { type Test } from 'tap';
import pg from 'pg';
import { atomically } from '../../src/store/lmdb/atomic.ts';
import type { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { indexTokenName } from '../../src/store/lmdb/token-names.ts';
import { TOKENS_NAMED } from '../../src/store/pg/tokens.ts';
import type { TokenRecord } from '../../src/store/records.ts';
import { startApi, type ApiHandle } from '../helpers/api.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { client, login } from '../auth/session-client.ts';

// GET /admin/api/tokens?name=: the token of one name, as the uniqueness rule compares names
// (NFC, then lower case), over real HTTP on both stores. The console's audit and usage filters
// resolve a typed name with it; they walked the pages of `q` (substring) matches before, and
// missed a name that 50 a page of names containing it kept off the pages they walked.
const PASSWORD = 'correct horse battery';
const env = { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: PASSWORD, TEST_PASSWORD_SCRYPT_N: '1024' };
const postgres = await startPostgres();
const servers: Record<'lmdb' | 'postgres', ApiHandle> = {
  lmdb: await startApi({ env }),
  postgres: await startApi({ env: { ...env, DATABASE_URL: postgres.url } }),
};
t.teardown(async () => {
  for (const s of Object.values(servers)) await s.stop();
  await postgres.stop();
});

// Duplicates of one name, written raw as a build from before names were unique left them.
const legacy = (id: string, name: string): TokenRecord => ({
  id, name, token_prefix: `lvk_${id.slice(4, 12)}`, hash: `hash-${id}`, enabled: true, expires_at: null, demo: false, revoked: false,
  created_at: '2026-01-01T00:00:00.000Z', grants: [],
});
const DUPLICATES = [legacy('tok_dupLobbyC', 'LOBBY'), legacy('tok_dupLobbyA', 'Lobby'), legacy('tok_dupLobbyB', 'lobby')];
const DUPLICATE_IDS = DUPLICATES.map((d) => d.id).sort();
const writeRaw: Record<keyof typeof servers, (toks: TokenRecord[]) => Promise<void>> = {
  async lmdb(toks) {
    const store = servers.lmdb.lmdb!;
    await atomically(store, () => {
      for (const tok of toks) {
        void store.db.tokens.put(tok.id, tok);
        void store.db.tokenHashes.put(tok.hash, tok.id);
        indexTokenName(store, undefined, tok);
      }
    });
  },
  async postgres(toks) {
    const c = new pg.Client(postgres.url);
    await c.connect();
    try {
      for (const tok of toks) await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [tok.id, tok.hash, tok, tok.created_at]);
    } finally {
      await c.end();
    }
  },
};

for (const [kind, server] of Object.entries(servers) as [keyof typeof servers, ApiHandle][]) {
  t.test(kind, async (t) => {
    const admin = client(server.baseUrl, await login(server.baseUrl, 'root', PASSWORD));
    const make = async (name: string) => {
      const r = await admin('POST', '/admin/api/tokens', { name, grants: [] });
      if (r.status !== 201) throw new Error(`${name}: ${r.status} ${r.text}`);
      return r.json as { id: string; name: string; token_prefix: string };
    };
    // 64 names that contain "branch" and sort before it, so a page of 50 substring matches
    // ends before the token named Branch
    for (let i = 0; i < 64; i++) await make(`a-branch-${String(i).padStart(2, '0')}`);
    const branch = await make('Branch');
    const others = {
      cafe: await make('Caf\u00e9 7'), // composed
      zoe: await make('Zoe\u0308'), // decomposed
      strasse: await make('Stra\u00dfe'),
      greek: await make('\u039f\u0394\u039f\u03a3'), // ΟΔΟΣ: its key ends in final sigma
      izmir: await make('\u0130zmir'), // İzmir: its key starts with i + U+0307
    };
    await writeRaw[kind](DUPLICATES);
    const ids = async (query: string) => {
      const r = await admin('GET', `/admin/api/tokens?${query}`);
      if (r.status !== 200) throw new Error(`${query}: ${r.status} ${r.text}`);
      return r.json.tokens.map((x: { id: string }) => x.id);
    };
    const named = (name: string, more = '') => ids(`name=${encodeURIComponent(name)}${more}`);

    t.test('the exact name among 64 names that contain it', async (t) => {
      const substring = await admin('GET', '/admin/api/tokens?q=branch&limit=50');
      t.notOk(substring.json.tokens.some((x: { id: string }) => x.id === branch.id), 'not on the first page of the substring search (what the console walked)');
      const r = await admin('GET', '/admin/api/tokens?name=Branch');
      t.equal(r.status, 200);
      t.same(r.json.tokens.map((x: { id: string }) => x.id), [branch.id], 'the token named Branch and no other');
      t.equal(r.json.next_cursor, null);
      t.equal(r.json.tokens[0].name, 'Branch');
      t.notOk('hash' in r.json.tokens[0], 'the token as the list shows it, without its hash');
      t.ok(Array.isArray(r.json.tokens[0].usage), 'with its usage, as a page of the search');
      t.same(await named('a-branch-07'), [(await ids('q=a-branch-07'))[0]], 'one of the names that contain it, alone');
    });

    t.test('case and Unicode composition are ignored, as in the uniqueness rule; nothing else is', async (t) => {
      for (const same of ['branch', 'BRANCH', 'bRaNcH']) t.same(await named(same), [branch.id], same);
      t.same(await named('Cafe\u0301 7'), [others.cafe.id], 'decomposed finds composed');
      t.same(await named('CAF\u00c9 7'), [others.cafe.id], 'upper case');
      t.same(await named('Zo\u00eb'), [others.zoe.id], 'composed finds decomposed');
      t.same(await named('\u03bf\u03b4\u03bf\u03c2'), [others.greek.id], 'οδος: the key of ΟΔΟΣ');
      t.same(await named('\u039f\u0394\u039f\u03a3'), [others.greek.id], 'ΟΔΟΣ as written');
      t.same(await named('\u0130ZMIR'), [others.izmir.id], 'İZMIR');
      t.same(await named('i\u0307zmir'), [others.izmir.id], 'the key of İzmir (i + U+0307)');
      const notSame = [
        'Branch ', ' Branch', 'Branc', 'Branchx', 'a-branch', 'branch-00', 'Branch\u200b', 'Bran ch',
        '\uff42\uff52\uff41\uff4e\uff43\uff48', // fullwidth: NFKC would fold it, NFC does not
        'STRASSE', 'strasse', // toLowerCase, not full case folding: ß is not ss
        '\u03bf\u03b4\u03bf\u03c3', // οδοσ: not the key of ΟΔΟΣ (οδος)
        'izmir', 'Izmir', // not the key of İzmir
      ];
      for (const other of notSame) t.same(await named(other), [], JSON.stringify(other));
      t.same(await named('Stra\u00dfe'), [others.strasse.id], 'Straße as written');
    });

    t.test('paged like the rest: duplicates an older store kept, in id order', async (t) => {
      const all = await named('lobby', '&limit=10');
      t.same(all, DUPLICATE_IDS, 'every spelling of the name, in id order');
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r = await admin('GET', `/admin/api/tokens?name=LoBbY&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
        t.equal(r.status, 200);
        t.ok(r.json.tokens.length <= 2);
        seen.push(...r.json.tokens.map((x: { id: string }) => x.id));
        cursor = r.json.next_cursor;
        pages++;
      } while (cursor && pages < 5);
      t.equal(pages, 2, 'two pages of two');
      t.same(seen, all, 'each once, the last page saying so');
      const first = await admin('GET', '/admin/api/tokens?name=lobby&limit=1');
      t.same(await named('lobby', `&limit=5&cursor=${first.json.next_cursor}`), all.slice(1), 'a cursor goes on after its row');
      // a cursor of another name: before this one's rows or after them all
      const before = await admin('GET', '/admin/api/tokens?q=a-branch&limit=1');
      t.same(await named('lobby', `&cursor=${before.json.next_cursor}`), all, 'a cursor of a name before it');
      const zoeCursor = Buffer.from(JSON.stringify(['zo\u00eb', others.zoe.id])).toString('base64url');
      t.same(await named('lobby', `&cursor=${zoeCursor}`), [], 'a cursor of a name after it');
    });

    t.test('with q: tokens matching both', async (t) => {
      t.same(await named('Branch', `&q=${branch.id}`), [branch.id], 'q the id');
      t.same(await named('Branch', `&q=${branch.token_prefix}`), [branch.id], 'q the prefix');
      t.same(await named('Branch', '&q=RAN'), [branch.id], 'q a part of the name');
      t.same(await named('Branch', '&q=a-branch'), [], 'q that the token does not match');
      t.same(await named('lobby', '&q=tok_dupLobbyB'), ['tok_dupLobbyB'], 'one of the duplicates');
    });

    t.test('validated as a name is: 422 at ["query","name"]', async (t) => {
      const long = 'x'.repeat(201);
      const cases: [string, string][] = [
        ['name=', 'string_too_short'],
        ['name=&limit=5', 'string_too_short'],
        ['name=a%00b', 'string_unicode'],
        [`name=${long}`, 'string_too_long'],
        [`name=${encodeURIComponent('\u{1F600}'.repeat(201))}`, 'string_too_long'],
      ];
      for (const [query, type] of cases) {
        const r = await admin('GET', `/admin/api/tokens?${query}`);
        t.equal(r.status, 422, query.slice(0, 40));
        t.match(r.json, { detail: [{ loc: ['query', 'name'], type }] }, query.slice(0, 40));
        t.equal(r.json.detail.length, 1, 'one issue');
      }
      // 200 characters (400 UTF-16 units) is a name's length: no token has it, none is found
      const emoji = await admin('GET', `/admin/api/tokens?name=${encodeURIComponent('\u{1F600}'.repeat(200))}`);
      t.same([emoji.status, emoji.json], [200, { tokens: [], next_cursor: null }], '200 emoji');
      const both = await admin('GET', `/admin/api/tokens?name=&limit=0`);
      t.same(both.json.detail.map((d: { loc: string[] }) => d.loc[1]).sort(), ['limit', 'name'], 'with the other parameters\' issues');
      const users = await admin('GET', '/admin/api/users?name=root');
      t.equal(users.status, 422, 'users have no name filter');
      t.match(users.json, { detail: [{ loc: ['query', 'name'], type: 'extra_forbidden' }] });
    });

    t.test('described in /openapi.json', async (t) => {
      const doc = await (await fetch(`${server.baseUrl}/openapi.json`)).json();
      const param = doc.paths['/admin/api/tokens'].get.parameters.find((p: { name: string }) => p.name === 'name');
      t.match(param, { in: 'query', required: false, schema: { type: 'string', minLength: 1, maxLength: 200 } });
    });

    if (kind === 'lmdb') {
      t.test('LMDB: a range of the name index, not a walk of it', async (t) => {
        // the app's own handle (an API worker's): its reads of tokensByName, counted
        const index = (server.store as LmdbBackend).store.db.tokensByName;
        const getRange = index.getRange;
        let read = 0;
        index.getRange = ((options: Parameters<typeof getRange>[0]) => {
          const range = getRange.call(index, options);
          return { *[Symbol.iterator]() {
            for (const entry of range) {
              read++;
              yield entry;
            }
          } };
        }) as unknown as typeof getRange;
        t.teardown(() => {
          index.getRange = getRange;
        });
        t.same(await named('Branch'), [branch.id]);
        t.ok(read <= 2, `${read} index entries read for one name (the token's, and the next to end on)`);
        read = 0;
        t.same(await named('lobby', '&limit=2'), DUPLICATE_IDS.slice(0, 2));
        t.ok(read <= 3, `${read} read for a page of two`);
        read = 0;
        await ids('q=no-such-name&limit=1');
        t.ok(read > 60, `a substring search that finds nothing, for comparison, walks them all: ${read}`);
      });
    } else {
      t.test('PostgreSQL: the name is read through the index of migration 6 (the stored name key)', async (t) => {
        const c = new pg.Client(postgres.url);
        await c.connect();
        t.teardown(() => c.end());
        // a table this small is read whole when that is cheaper: the planner is asked whether
        // the index serves the query at all
        await c.query('SET enable_seqscan = off');
        const plan = JSON.stringify((await c.query(`EXPLAIN (FORMAT JSON) ${TOKENS_NAMED}`, ['branch'])).rows);
        t.match(plan, /tokens_name_key/, 'the index is in the plan');
        t.notMatch(plan, /Seq Scan/, 'no scan of the table');
      });
    }
  });
}
