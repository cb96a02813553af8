import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import * as described from '../../src/openapi/responses.ts';
import { createToken } from '../../src/admin/tokens.ts';
import { AUDIT_SCAN_BUDGET, type AuditRecord } from '../../src/store/index.ts';
import { reserve, refund, writeAudit } from '../../src/store/lmdb/index.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { openStore } from '../../src/store/lmdb/open.ts';
import type { TokenRecord } from '../../src/store/records.ts';
import { getToken } from '../../src/store/lmdb/tokens.ts';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { client, login } from '../auth/session-client.ts';

// issue 14 (console at scale), admin API half, over real HTTP against the real store: unique
// token names, token and user search and paging, audit order and filters, daily totals.
const dir = tempDir();
const dataDir = path.join(dir, 'data');
const clock = path.join(dir, 'clock');
const AT = Date.parse('2026-05-04T10:00:00.000Z');
const DAY = 86_400_000;
fs.writeFileSync(clock, new Date(AT).toISOString());

// A store written before names were unique and before daily totals were kept: two tokens
// share a name and a ledger entry has no totals. Written raw, as an older build left them.
const legacy = (id: string, name: string): TokenRecord => ({
  id, name, token_prefix: `lvk_${id.slice(4, 12)}`, hash: `hash-${id}`, enabled: true, expires_at: null, demo: false, revoked: false,
  created_at: '2026-01-01T00:00:00.000Z', grants: [{ module_id: 'rgb_liveness', limit: null, period: 'never' }],
});
{
  const old = openStore(dataDir);
  await old.root.transaction(() => {
    // as an older build left it: no derived-index flags
    void old.db.meta.remove('token_name_index_v1');
    void old.db.meta.remove('daily_totals_v1');
    void old.db.meta.remove('by_token_index_v1');
    for (const tok of [legacy('tok_legacyAAAA', 'Front desk'), legacy('tok_legacyBBBB', 'front desk')]) {
      void old.db.tokens.put(tok.id, tok);
      void old.db.tokenHashes.put(tok.hash, tok.id);
    }
    void old.db.ledger.put([AT - 3 * DAY, 'led_legacy'], {
      id: 'led_legacy', request_id: 'req_legacy', token_id: 'tok_legacyAAAA', module_id: 'rgb_liveness', units: 7, kind: 'charge',
      at: new Date(AT - 3 * DAY).toISOString(), windows: { day: '2026-05-01', month: '2026-05' },
    });
  });
  await old.close();
}

// the service's app in process on its real store (no models): test/helpers/api.ts (was one server start)
const server = await startApi({ dataDir, env: { CLOCK_FILE: clock, ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' } });
const store = server.lmdb!;
const backend = new LmdbBackend(store);
t.teardown(() => server.stop());
const base = server.baseUrl;
const admin = client(base, await login(base, 'root', 'correct horse battery'));

if (!FormatRegistry.Has('date')) FormatRegistry.Set('date', (v) => /^\d{4}-\d{2}-\d{2}$/.test(v));
/** The answer has the shape /openapi.json describes (the schemas it is generated from). */
const conforms = (t: Test, schema: TSchema, value: unknown, what: string) => {
  const errors = [...Value.Errors(schema, value)].slice(0, 3).map((e) => `${e.path}: ${e.message}`);
  t.same(errors, [], `${what} matches its OpenAPI schema`);
};

/** A raw JSON body, so escapes such as \ud800 reach the server as written. */
const raw = (method: string, p: string, text: string) => admin(method, p, text);

t.test('token names are unique ignoring case; a rename to a taken name is a 409', async (t) => {
  const a = await admin('POST', '/admin/api/tokens', { name: 'Kiosk-17', grants: [] });
  t.equal(a.status, 201);
  for (const name of ['Kiosk-17', 'kiosk-17', 'KIOSK-17']) {
    const dup = await admin('POST', '/admin/api/tokens', { name, grants: [] });
    t.equal(dup.status, 409, name);
    t.equal(dup.json.error.code, 'conflict');
    t.match(dup.json.error.message, 'exists');
  }
  const b = await admin('POST', '/admin/api/tokens', { name: 'Kiosk-18', grants: [] });
  const clash = await admin('PATCH', `/admin/api/tokens/${b.json.id}`, { name: 'kiosk-17', enabled: false });
  t.equal(clash.status, 409, 'rename onto another token\'s name');
  t.hasStrict((await admin('GET', `/admin/api/tokens/${b.json.id}`)).json, { name: 'Kiosk-18', enabled: true }, 'a refused patch changes nothing');
  t.equal((await admin('PATCH', `/admin/api/tokens/${a.json.id}`, { name: 'kiosk-17' })).status, 200, 'a token may change the case of its own name');
  t.equal((await admin('PATCH', `/admin/api/tokens/${a.json.id}`, { name: 'Kiosk-17 (old)' })).status, 200);
  t.equal((await admin('POST', '/admin/api/tokens', { name: 'KIOSK-17', grants: [] })).status, 201, 'the old name is free again');
  t.equal((await admin('POST', '/admin/api/tokens', { name: 'Kiosk-17 (OLD)', grants: [] })).status, 409);

  const revoked = await admin('POST', '/admin/api/tokens', { name: 'retired kiosk', grants: [] });
  await admin('DELETE', `/admin/api/tokens/${revoked.json.id}`);
  t.equal((await admin('POST', '/admin/api/tokens', { name: 'Retired Kiosk', grants: [] })).status, 409, 'a revoked token keeps its name');

  // the check runs inside the write transaction: of simultaneous creates (spread over both
  // API workers' connections) exactly one wins
  const racing = await Promise.all(Array.from({ length: 6 }, (_, i) => admin('POST', '/admin/api/tokens', { name: i % 2 ? 'Race' : 'race', grants: [] })));
  t.same(racing.map((r) => r.status).sort(), [201, 409, 409, 409, 409, 409], 'one of six simultaneous creates wins');

  const cli = await server.cli(['token', 'create', '--name', 'kiosk-18']);
  t.equal(cli.code, 4, 'the CLI refuses a taken name too (conflict)');
  t.match(cli.stderr, 'exists');
});

t.test('duplicates already in the store stay usable; only new names are checked', async (t) => {
  const listed = (await admin('GET', '/admin/api/tokens')).json.tokens.filter((x: any) => x.name.toLowerCase() === 'front desk');
  t.equal(listed.length, 2, 'start-up refused nothing and both are listed');
  const found = await admin('GET', '/admin/api/tokens?q=front');
  t.same(found.json.tokens.map((x: any) => x.id).sort(), ['tok_legacyAAAA', 'tok_legacyBBBB'], 'both are found by search');
  t.equal((await admin('PATCH', '/admin/api/tokens/tok_legacyAAAA', { enabled: false, name: 'Front desk' })).status, 200, 'a duplicate can change without renaming');
  t.equal((await admin('DELETE', '/admin/api/tokens/tok_legacyAAAA')).status, 204, 'and be revoked');
  t.equal((await admin('POST', '/admin/api/tokens', { name: 'FRONT DESK', grants: [] })).status, 409, 'a third is refused');
  t.equal((await admin('PATCH', '/admin/api/tokens/tok_legacyBBBB', { name: 'front desk 2' })).status, 200, 'one can be renamed away');
  t.equal((await admin('PATCH', '/admin/api/tokens/tok_legacyBBBB', { name: 'Front Desk' })).status, 409, 'but not back while the other holds it');
  const ledger = await admin('GET', '/admin/api/usage?token_id=tok_legacyAAAA&order=desc');
  t.same(ledger.json.items.map((e: any) => e.id), ['led_legacy'], 'an older ledger row is found by token');
});

t.test('names must be well-formed Unicode text (issue 15)', async (t) => {
  const lone = await raw('POST', '/admin/api/tokens', '{"name":"kiosk \\ud800","grants":[]}');
  t.equal(lone.status, 422);
  t.same(lone.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'name'], 'string_unicode']]);
  t.equal((await raw('POST', '/admin/api/tokens', '{"name":"\\udc00","grants":[]}')).status, 422, 'a lone low surrogate');
  t.equal((await raw('POST', '/admin/api/tokens', '{"name":"bell\\u0007","grants":[]}')).status, 422, 'a control character');
  const emoji = await raw('POST', '/admin/api/tokens', '{"name":"kiosk \\ud83e\\udd8a","grants":[]}');
  t.equal(emoji.status, 201, 'a surrogate pair is one well-formed character');
  t.equal(emoji.json.name, 'kiosk 🦊');
  const rename = await raw('PATCH', `/admin/api/tokens/${emoji.json.id}`, '{"name":"\\ud800x"}');
  t.equal(rename.status, 422);
  t.same(rename.json.detail[0].loc, ['body', 'name']);
  const user = await raw('POST', '/admin/api/users', '{"username":"op\\ud800","password":"long enough password","role":"admin"}');
  t.equal(user.status, 422);
  t.same(user.json.detail.map((d: any) => d.loc), [['body', 'username']]);
  t.equal(user.json.detail[0].type, 'string_pattern_mismatch');
  t.ok(user.text.includes('"op\\ud800"'), 'the echoed input is escaped, so the answer is valid UTF-8');
  t.equal((await admin('GET', '/admin/api/tokens?q=x')).status, 200);
});

// review3 F3: names that list alike must not be two names. Characters that show nothing or
// reorder what is shown, and white space at either end, are refused where a name is given
// (create and rename, API and CLI); letters, marks, inner spaces and emoji of any script pass.
t.test('a name holds no invisible or direction-changing character and no white space at its ends', async (t) => {
  const refused = ['branch-7\\u200b', 'branch-7\\ufeff', 'bran\\u00adch-7', 'branch-7 ', ' branch-7', ' ', '\\u200e', 'pay\\u202elanigiro', 'a\\u2028b', '\\u00a0kiosk', 'kiosk\\u3000'];
  for (const name of refused) {
    const r = await raw('POST', '/admin/api/tokens', `{"name":"${name}","grants":[]}`);
    t.equal(r.status, 422, `${name} refused`);
    t.same(r.json.detail?.map((d: any) => [d.loc, d.type]), [[['body', 'name'], 'string_unicode']], `${name}: one fault, on the name`);
  }
  const ok = await raw('POST', '/admin/api/tokens', '{"name":"Filiale Straße 7 – Kiosk 🦊 分店 فرع","grants":[]}');
  t.equal(ok.status, 201, 'letters of any script, inner spaces, a dash and an emoji');
  const combining = await raw('POST', '/admin/api/tokens', '{"name":"Cafe\\u0301 2","grants":[]}');
  t.equal(combining.status, 201, 'a combining accent is a visible mark, not a format character');
  const rename = await raw('PATCH', `/admin/api/tokens/${ok.json.id}`, '{"name":"Filiale\\u200b"}');
  t.equal(rename.status, 422, 'a rename is held to the same rule');
  t.equal((await admin('GET', `/admin/api/tokens/${ok.json.id}`)).json.name, 'Filiale Straße 7 – Kiosk 🦊 分店 فرع', 'and changes nothing');
  const cli = await server.cli(['token', 'create', '--name', 'branch-7\u200b']);
  t.equal(cli.code, 2, 'the CLI refuses it too');
  t.match(cli.stderr, /--name must be 1 to 200 characters of text without control, invisible or direction-changing characters/);
});

t.test('tokens: server-side search and paging in name order', async (t) => {
  const made: { id: string; name: string; token_prefix: string }[] = [];
  for (let i = 0; i < 120; i++) {
    const { token } = await createToken(backend, { name: `fleet ${String(i).padStart(3, '0')}${i % 7 === 0 ? ' lobby' : ''}`, grants: [] });
    made.push(token);
  }
  const all = (await admin('GET', '/admin/api/tokens')).json;
  t.same(Object.keys(all), ['tokens'], 'without paging parameters: the contract\'s whole list');
  t.equal(all.tokens.length >= 120, true);

  const seen: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await admin('GET', `/admin/api/tokens?limit=50${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    t.ok(r.json.tokens.length <= 50);
    seen.push(...r.json.tokens);
    cursor = r.json.next_cursor;
    pages++;
  } while (cursor && pages < 20);
  t.equal(cursor, null, 'the last page says so');
  t.equal(seen.length, all.tokens.length, 'the pages hold every token once');
  t.equal(new Set(seen.map((x) => x.id)).size, seen.length);
  const keys = seen.map((x) => x.name.normalize('NFC').toLowerCase());
  t.same(keys, [...keys].sort(), 'in name order, case ignored');
  t.notOk(JSON.stringify(seen).includes('"hash"'), 'no hashes');

  const lobby = await admin('GET', '/admin/api/tokens?q=LOBBY&limit=5');
  t.equal(lobby.json.tokens.length, 5);
  t.ok(lobby.json.tokens.every((x: any) => x.name.endsWith(' lobby')), 'substring of the name, case ignored');
  const rest = await admin('GET', `/admin/api/tokens?q=LOBBY&limit=100&cursor=${lobby.json.next_cursor}`);
  t.equal(lobby.json.tokens.length + rest.json.tokens.length, made.filter((m) => m.name.endsWith(' lobby')).length);
  t.equal(rest.json.next_cursor, null);

  const target = made[42]!;
  t.same((await admin('GET', `/admin/api/tokens?q=${target.token_prefix}`)).json.tokens.map((x: any) => x.id), [target.id], 'by token prefix');
  t.same((await admin('GET', `/admin/api/tokens?q=${target.id}`)).json.tokens.map((x: any) => x.id), [target.id], 'by id');
  t.same((await admin('GET', '/admin/api/tokens?q=no-such-token')).json, { tokens: [], next_cursor: null });
  conforms(t, described.TokenList, all, 'the whole list');
  conforms(t, described.TokenList, lobby.json, 'a page');

  for (const [query, loc] of [['limit=0', 'limit'], ['limit=1001', 'limit'], ['cursor=bm9wZQ', 'cursor'], ['sort=name', 'sort']] as const) {
    const bad = await admin('GET', `/admin/api/tokens?${query}`);
    t.equal(bad.status, 422, query);
    t.same(bad.json.detail[0].loc, ['query', loc]);
  }
});

t.test('users: server-side search and paging', async (t) => {
  for (const name of ['ops-anna', 'ops-ben', 'ops-carl', 'viewer-dora']) {
    t.equal((await admin('POST', '/admin/api/users', { username: name, password: 'long enough password', role: 'user' })).status, 201);
  }
  const first = await admin('GET', '/admin/api/users?q=OPS-&limit=2');
  t.same(first.json.users.map((u: any) => u.username), ['ops-anna', 'ops-ben']);
  t.type(first.json.next_cursor, 'string');
  const second = await admin('GET', `/admin/api/users?q=ops-&limit=2&cursor=${first.json.next_cursor}`);
  t.same(second.json.users.map((u: any) => u.username), ['ops-carl']);
  t.equal(second.json.next_cursor, null);
  t.notOk(JSON.stringify(first.json).includes('password_hash'));
  const dora = first.json.users[0].id;
  t.same((await admin('GET', `/admin/api/users?q=${dora}`)).json.users.map((u: any) => u.username), ['ops-anna'], 'by id');
  t.same(Object.keys((await admin('GET', '/admin/api/users')).json), ['users'], 'unpaged without parameters');
  conforms(t, described.UserList, first.json, 'a page of users');
});

t.test('audit: newest first on request, filtered by status and outcome, with outcome, replay and token name', async (t) => {
  const { token } = await createToken(backend, { name: 'audited kiosk', grants: [] });
  const rec = (i: number, over: Partial<AuditRecord>): AuditRecord => ({
    request_id: `req_audit${String(i).padStart(2, '0')}`, at: new Date(AT + i * 1000).toISOString(), token_id: token.id, module_id: 'rgb_liveness',
    client_ip: '127.0.0.1', country: null, status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 5, outcome: 'live', replayed: false, ...over,
  });
  const records = [
    rec(1, {}),
    rec(2, { outcome: 'non_live' }),
    rec(3, { replayed: true, charged_units: 0 }),
    rec(4, { status: 429, error_code: 'quota_exceeded', outcome: 'error', charged_units: 0 }),
    rec(5, { status: 401, error_code: 'invalid_token', token_id: null, module_id: null, outcome: 'error', charged_units: 0 }),
    rec(6, { outcome: 'retry', module_id: 'color_liveness' }),
  ];
  // a record an older build wrote: no outcome, no replayed
  const { outcome: _o, replayed: _r, ...old } = rec(7, { status: 500, error_code: 'inference_failed', charged_units: 0 });
  for (const r of [...records, old as AuditRecord]) await writeAudit(store, r);
  const ids = (r: any) => r.json.items.map((a: any) => a.request_id);
  const window = `from=${new Date(AT).toISOString()}&to=${new Date(AT + 60_000).toISOString()}`;

  t.same(ids(await admin('GET', `/admin/api/audit?${window}`)), records.map((r) => r.request_id).concat('req_audit07'), 'oldest first by default, as before');
  const desc = await admin('GET', `/admin/api/audit?${window}&order=desc&limit=3`);
  t.same(ids(desc), ['req_audit07', 'req_audit06', 'req_audit05'], 'newest first');
  const more = await admin('GET', `/admin/api/audit?${window}&order=desc&limit=3&cursor=${desc.json.next_cursor}`);
  t.same(ids(more), ['req_audit04', 'req_audit03', 'req_audit02'], 'the next page goes on backwards');
  t.same(ids(await admin('GET', `/admin/api/audit?${window}&order=desc&status=4xx`)), ['req_audit05', 'req_audit04']);
  t.same(ids(await admin('GET', `/admin/api/audit?${window}&status=429`)), ['req_audit04']);
  t.same(ids(await admin('GET', `/admin/api/audit?${window}&outcome=live`)), ['req_audit01', 'req_audit03']);
  t.same(ids(await admin('GET', `/admin/api/audit?${window}&outcome=error`)), ['req_audit04', 'req_audit05', 'req_audit07'], 'an old error record counts as error');
  t.same(ids(await admin('GET', `/admin/api/audit?${window}&outcome=retry&module_id=color_liveness&token_id=${token.id}`)), ['req_audit06']);

  // one token's rows through the per-token index, newest first, two a page
  const walked: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 10; i++) {
    const r = await admin('GET', `/admin/api/audit?${window}&token_id=${token.id}&order=desc&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    walked.push(...ids(r));
    cursor = r.json.next_cursor;
    if (!cursor) break;
  }
  t.same(walked, ['req_audit07', 'req_audit06', 'req_audit04', 'req_audit03', 'req_audit02', 'req_audit01'], 'a token\'s rows, paged backwards');
  t.same(ids(await admin('GET', `/admin/api/audit?token_id=${token.id}&from=${new Date(AT + 2000).toISOString()}&to=${new Date(AT + 4000).toISOString()}`)), ['req_audit02', 'req_audit03'], 'from inclusive, to exclusive');

  const page = (await admin('GET', `/admin/api/audit?${window}`)).json;
  conforms(t, described.Page(described.AuditRecord), page, 'an audit page');
  const items = page.items;
  t.hasStrict(items[2], { request_id: 'req_audit03', outcome: 'live', replayed: true, token_name: 'audited kiosk' });
  t.hasStrict(items[4], { token_id: null, token_name: null, outcome: 'error' });
  t.hasStrict(items[6], { request_id: 'req_audit07', outcome: 'error', replayed: null }, 'unknown replay on an old record');

  for (const [query, loc] of [['status=600', 'status'], ['status=2x', 'status'], ['outcome=alive', 'outcome'], ['order=newest', 'order']] as const) {
    const bad = await admin('GET', `/admin/api/audit?${query}`);
    t.equal(bad.status, 422, query);
    t.same(bad.json.detail.map((d: any) => d.loc), [['query', loc]]);
  }
  t.equal((await admin('GET', '/admin/api/usage?status=200')).status, 422, 'status filters the audit only');
});

t.test('audit: a selective filter walks a bounded stretch per call and goes on from there', async (t) => {
  const T0 = AT + 10 * DAY;
  const n = AUDIT_SCAN_BUDGET + 50;
  const rec = (i: number, status: number): AuditRecord => ({
    request_id: `req_bulk${String(i).padStart(6, '0')}`, at: new Date(T0 + i).toISOString(), token_id: null, module_id: 'rgb_liveness', client_ip: '127.0.0.1',
    country: null, status, error_code: status === 200 ? null : 'server_busy', captures: 1, charged_units: 0, latency_ms: 1, outcome: status === 200 ? 'live' : 'error', replayed: false,
  });
  await store.root.transaction(() => {
    for (let i = 0; i < n; i++) void store.db.audit.put([T0 + i, rec(i, i === 0 ? 503 : 200).request_id], rec(i, i === 0 ? 503 : 200));
  });
  const window = `from=${new Date(T0).toISOString()}&to=${new Date(T0 + n).toISOString()}`;
  const first = await admin('GET', `/admin/api/audit?${window}&order=desc&status=503`);
  t.same(first.json.items, [], 'the newest stretch holds no 503');
  t.type(first.json.next_cursor, 'string', 'but the log goes on');
  const second = await admin('GET', `/admin/api/audit?${window}&order=desc&status=503&cursor=${first.json.next_cursor}`);
  t.same(second.json.items.map((a: any) => a.request_id), ['req_bulk000000'], 'found further back');
  t.equal(second.json.next_cursor, null);
  const unfiltered = await admin('GET', `/admin/api/audit?${window}&order=desc&limit=1000`);
  t.equal(unfiltered.json.items.length, 1000, 'without a status or outcome filter pages are full, as before');
});

t.test('the new endpoint and parameters are in /openapi.json', async (t) => {
  const doc = await (await fetch(`${base}/openapi.json`)).json();
  t.ok(doc.paths['/admin/api/usage/daily']?.get, 'the daily totals endpoint');
  t.same(doc.paths['/admin/api/audit'].get.parameters.map((p: any) => p.name).sort(), ['cursor', 'from', 'limit', 'module_id', 'order', 'outcome', 'status', 'to', 'token_id']);
  t.same(doc.paths['/admin/api/tokens'].get.parameters.map((p: any) => p.name), ['q', 'name', 'limit', 'cursor']);
  t.ok(doc.paths['/admin/api/tokens'].post.responses['409'], 'a taken name is documented');
});

t.test('usage: daily totals from the server, every UTC day of the range', async (t) => {
  const { token } = await createToken(backend, { name: 'charted kiosk', grants: [{ module_id: 'rgb_liveness', limit: null, period: 'never' }, { module_id: 'color_liveness', limit: null, period: 'never' }] });
  const charge = async (moduleId: 'rgb_liveness' | 'color_liveness', units: number, at: number) => {
    const out = await reserve(store, { token: getToken(store, token.id)!, moduleId, units, requestId: `req_${Math.random().toString(36).slice(2)}`, idempotencyKey: null, fingerprint: null, at });
    if (out.kind !== 'reserved') throw new Error('reserve failed');
    return out.reservation;
  };
  await charge('rgb_liveness', 3, AT - DAY);
  const refunded = await charge('rgb_liveness', 2, AT - DAY);
  await refund(store, refunded.id, AT); // refunded the next day: the units go back to the day that took them
  await charge('color_liveness', 4, AT);
  await charge('rgb_liveness', 1, AT + 60_000);

  const mine = await admin('GET', `/admin/api/usage/daily?token_id=${token.id}&from=2026-05-01&to=2026-05-06`);
  t.equal(mine.status, 200);
  t.same(mine.json, {
    from: '2026-05-01', to: '2026-05-05', total: 8,
    days: [
      { day: '2026-05-01', charged: 0, refunded: 0, units: 0 },
      { day: '2026-05-02', charged: 0, refunded: 0, units: 0 },
      { day: '2026-05-03', charged: 5, refunded: 2, units: 3 },
      { day: '2026-05-04', charged: 5, refunded: 0, units: 5 },
      { day: '2026-05-05', charged: 0, refunded: 0, units: 0 },
    ],
  });
  conforms(t, described.UsageDaily, mine.json, 'the daily totals');
  conforms(t, described.Page(described.LedgerEntry), (await admin('GET', `/admin/api/usage?token_id=${token.id}`)).json, 'a ledger page');
  const rgb = await admin('GET', `/admin/api/usage/daily?token_id=${token.id}&module_id=rgb_liveness&from=2026-05-03&to=2026-05-05`);
  t.same(rgb.json.days.map((d: any) => d.units), [3, 1]);
  const everyone = await admin('GET', '/admin/api/usage/daily?from=2026-05-01T00:00:00Z&to=2026-05-05T00:00:00Z');
  t.same(everyone.json.days.map((d: any) => [d.day, d.units]), [['2026-05-01', 7], ['2026-05-02', 0], ['2026-05-03', 3], ['2026-05-04', 5]], 'the older ledger entry is counted (totals built from the ledger)');
  const ledgerUnits = async (tokenId: string) => (await admin('GET', `/admin/api/usage?token_id=${tokenId}&limit=1000`)).json.items.reduce((s: number, e: any) => s + (e.kind === 'charge' ? e.units : -e.units), 0);
  t.equal(mine.json.total, await ledgerUnits(token.id), 'the totals agree with the ledger');
  t.equal((await admin('GET', `/admin/api/usage?token_id=${token.id}`)).json.items[0].token_name, 'charted kiosk', 'ledger rows carry the token name');

  const dflt = await admin('GET', '/admin/api/usage/daily');
  t.equal(dflt.json.days.length, 30, 'the default range: 30 days');
  t.equal(dflt.json.to, '2026-05-04', 'ending today (UTC, from the server clock)');

  for (const [query, loc] of [['from=2020-01-01&to=2026-01-01', 'from'], ['from=2026-05-04&to=2026-05-01', 'to'], ['from=yesterday', 'from'], ['status=200', 'status'], ['to=2026-05-04T10:00:00', 'to']] as const) {
    const bad = await admin('GET', `/admin/api/usage/daily?${query}`);
    t.equal(bad.status, 422, query);
    t.same(bad.json.detail[0].loc, ['query', loc], query);
  }
});
