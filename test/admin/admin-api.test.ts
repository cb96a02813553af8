import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { reserve } from '../../src/store/lmdb/index.ts';
import { atomically } from '../../src/store/lmdb/atomic.ts';
import { markFailedWrites } from '../../src/store/lmdb/settle.ts';
import { getToken } from '../../src/store/lmdb/tokens.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, tempDir } from '../helpers/server.ts';
import { client, login } from '../auth/session-client.ts';
import { waitFor } from '../helpers/wait.ts';

// contract.md "Administration API", over real HTTP, in process (test/helpers/api.ts: the
// service's own app composition on a real LMDB store, no child process; was one server start).
// Usage is produced with the metering code's own reserve(), committed on this thread through
// the main thread's handle (server.lmdb), as a thread without the metering writer commits it:
// an API worker's reservation is answered before its commit, which a read may not see yet.
const dir = tempDir();
const clock = path.join(dir, 'clock');
const AT = Date.parse('2026-05-04T10:00:00.000Z');
fs.writeFileSync(clock, new Date(AT).toISOString());
// scrypt at the test-only N=2^10: these tests make users and log in, and never test the hash's
// cost (N=2^17 is tested in test/auth/login-concurrency.test.ts)
const server = await startApi({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock, ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery', TEST_PASSWORD_SCRYPT_N: '1024' } });
const store = server.lmdb!;
t.teardown(() => server.stop());
const base = server.baseUrl;
const session = await login(base, 'root', 'correct horse battery');
const admin = client(base, session);

/** Tokens through the API itself: the CLI costs a process start per token. */
async function makeApiToken(grants: [string, number | null, string][]): Promise<{ id: string; token: string }> {
  const r = await admin('POST', '/admin/api/tokens', { name: `test-${Math.random().toString(36).slice(2)}`, grants: grants.map(([module_id, limit, period]) => ({ module_id, limit, period })) });
  return { id: r.json.id, token: r.json.token };
}

async function charge(tokenId: string, moduleId: 'rgb_liveness' | 'color_liveness', units: number, at = AT, requestId = `req_${Math.random().toString(36).slice(2)}`) {
  const token = getToken(store, tokenId)!;
  const out = await reserve(store, { token, moduleId, units, requestId, idempotencyKey: null, fingerprint: null, at });
  if (out.kind !== 'reserved') throw new Error('reserve failed');
  return out.reservation;
}

const STATE_CHANGING: [string, string, unknown][] = [
  ['PATCH', '/admin/api/modules/rgb_liveness', { enabled: true }],
  ['POST', '/admin/api/users', { username: 'x1', password: 'password1', role: 'user' }],
  ['PATCH', '/admin/api/users/usr_nope', { enabled: true }],
  ['POST', '/admin/api/tokens', { name: 'x', grants: [] }],
  ['PATCH', '/admin/api/tokens/tok_nope', { enabled: true }],
  ['PUT', '/admin/api/tokens/tok_nope/grants/rgb_liveness', { limit: 1, period: 'day' }],
  ['DELETE', '/admin/api/tokens/tok_nope/grants/rgb_liveness', undefined],
  ['DELETE', '/admin/api/tokens/tok_nope', undefined],
  ['POST', '/admin/api/settlements/rsv_nope/resolve', { action: 'refund' }],
  ['POST', '/admin/api/model-set', { model_set: 'tiny_v1' }],
];
const READS = ['/admin/api/model-set', '/admin/api/modules', '/admin/api/users', '/admin/api/tokens', '/admin/api/tokens/tok_nope', '/admin/api/usage', '/admin/api/audit', '/admin/api/settlements'];

t.test('no session: 401 invalid_session on every endpoint', async (t) => {
  const anon = client(base, undefined);
  for (const p of READS) t.equal((await anon('GET', p)).json.error.code, 'invalid_session', `GET ${p}`);
  for (const [m, p, b] of STATE_CHANGING) {
    const r = await anon(m, p, b, { csrf: session.csrf });
    t.equal(r.status, 401, `${m} ${p}`);
    t.equal(r.json.error.code, 'invalid_session');
  }
  const forged = await client(base, { ...session, cookie: 'lv_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' })('GET', '/admin/api/tokens');
  t.equal(forged.status, 401, 'a made-up session id');
  // The model-set routes once called the guard without awaiting it: the refusal became an
  // unhandled rejection that ended the process right after (GET) or before (POST) answering.
  // (in process, such a rejection fails this file: Node ends a process on an unhandled rejection)
  t.equal((await fetch(`${base}/health/live`)).status, 200, 'the service is still up');
});

t.test('CSRF token missing or wrong: 403 csrf_failed on every state-changing call, nothing changed', async (t) => {
  const other = await login(base, 'root', 'correct horse battery');
  for (const [m, p, b] of STATE_CHANGING) {
    for (const [name, csrf] of [['missing', null], ['wrong', 'x'.repeat(43)], ['another session\'s', other.csrf], ['empty', '']] as const) {
      const r = await admin(m, p, b, { csrf });
      t.equal(r.status, 403, `${m} ${p}: ${name}`);
      t.equal(r.json.error.code, 'csrf_failed');
    }
  }
  t.equal((await admin('GET', '/admin/api/users')).json.users.length, 1, 'no user was created');
  t.equal((await admin('GET', '/admin/api/tokens', undefined, { csrf: null })).status, 200, 'reads need no CSRF token');
  t.equal((await admin('GET', '/admin/api/model-set')).json.activating, null, 'no model-set change was requested');
  t.equal((await fetch(`${base}/health/live`)).status, 200, 'the service is still up');
});

t.test('a session whose account lost the admin role: 403 forbidden', async (t) => {
  const made = await admin('POST', '/admin/api/users', { username: 'ops', password: 'ops password', role: 'admin', current_password: 'correct horse battery' });
  t.equal(made.status, 201);
  const ops = client(base, await login(base, 'ops', 'ops password'));
  t.equal((await ops('GET', '/admin/api/tokens')).status, 200);
  // demoted behind the API's back: the role is read on every call
  const user = store.db.users.get(made.json.id)!;
  await store.db.users.put(made.json.id, { ...user, role: 'user' });
  const r = await ops('GET', '/admin/api/tokens');
  t.equal(r.status, 403);
  t.equal(r.json.error.code, 'forbidden');
  t.equal((await ops('POST', '/admin/api/tokens', { name: 'x', grants: [] })).json.error.code, 'forbidden');
  await store.db.users.put(made.json.id, { ...user, role: 'admin' });
  t.equal((await ops('GET', '/admin/api/tokens')).status, 200, 'promoted again: the same session works');
  t.equal((await admin('PATCH', `/admin/api/users/${made.json.id}`, { role: 'user', current_password: 'correct horse battery' })).status, 200);
  const demoted = await ops('GET', '/admin/api/users');
  t.equal(demoted.status, 403, 'demoted through the API: 403 forbidden, not a vanished session');
  t.equal(demoted.json.error.code, 'forbidden');
  t.equal((await ops('PATCH', `/admin/api/users/${made.json.id}`, { role: 'admin' })).json.error.code, 'forbidden', 'it cannot promote itself back');
  const who = await ops('GET', '/auth/session');
  t.equal(who.status, 200);
  t.equal(who.json.role, 'user', 'the session reports the current role');
  t.equal((await ops('POST', '/auth/logout')).status, 204, 'and can log out');
  t.equal((await ops('GET', '/admin/api/users')).status, 401);
});

t.test('unknown body fields and malformed bodies: 422 with loc', async (t) => {
  const cases: [string, string, unknown, (string | number)[]][] = [
    ['PATCH', '/admin/api/modules/rgb_liveness', { enabled: true, ready: true }, ['body', 'ready']],
    ['POST', '/admin/api/users', { username: 'u2', password: 'password1', role: 'user', admin: true }, ['body', 'admin']],
    ['POST', '/admin/api/tokens', { name: 'n', grants: [], plaintext: 'lvk_x' }, ['body', 'plaintext']],
    ['POST', '/admin/api/tokens', { name: 'n', grants: [{ module_id: 'rgb_liveness', limit: 1, period: 'day', used: 0 }] }, ['body', 'grants', 0, 'used']],
    ['POST', '/admin/api/tokens', { name: 'n', grants: [{ module_id: 'rgb_liveness', limit: -1, period: 'day' }] }, ['body', 'grants', 0, 'limit']],
    ['POST', '/admin/api/tokens', { name: 'n', grants: [{ module_id: 'rgb_liveness', limit: 1, period: 'week' }] }, ['body', 'grants', 0, 'period']],
    ['POST', '/admin/api/tokens', { name: 'n', grants: [{ module_id: 'rgb_liveness', limit: 1, period: 'day' }, { module_id: 'rgb_liveness', limit: 2, period: 'day' }] }, ['body', 'grants', 1, 'module_id']],
    ['POST', '/admin/api/tokens', { name: 'n', expires_at: 'tomorrow', grants: [] }, ['body', 'expires_at']],
    ['POST', '/admin/api/tokens', { grants: [] }, ['body', 'name']],
    ['PUT', '/admin/api/tokens/tok_nope/grants/rgb_liveness', { limit: 1, period: 'day', module_id: 'rgb_liveness' }, ['body', 'module_id']],
    ['POST', '/admin/api/settlements/rsv_nope/resolve', { action: 'forgive' }, ['body', 'action']],
    ['PATCH', '/admin/api/tokens/tok_nope', undefined, ['body']],
  ];
  for (const [m, p, b, loc] of cases) {
    const r = await admin(m, p, b);
    t.equal(r.status, 422, `${m} ${p} ${JSON.stringify(b)}`);
    t.ok(r.json.detail.some((d: any) => JSON.stringify(d.loc) === JSON.stringify(loc) && d.msg && d.type), `loc ${JSON.stringify(loc)} in ${JSON.stringify(r.json.detail)}`);
  }
  const bad = await admin('POST', '/admin/api/tokens', '{"name":', {});
  t.equal(bad.status, 422, 'broken JSON');
});

t.test('modules: list with readiness, enable and disable, unknown id 404', async (t) => {
  const r = await admin('GET', '/admin/api/modules');
  t.equal(r.status, 200);
  t.same(r.json.modules.map((m: any) => [m.module_id, m.modes]), [['rgb_liveness', ['rgb_single', 'rgb_sequence']], ['color_liveness', ['color']]]);
  for (const m of r.json.modules) {
    t.hasStrict(m, { enabled: true });
    t.type(m.ready, 'boolean');
    t.type(m.model_set, 'string');
    t.type(m.decision_policy, 'string');
    t.type(m.threshold, 'number');
    t.ok('execution_provider' in m);
  }
  const off = await admin('PATCH', '/admin/api/modules/color_liveness', { enabled: false });
  t.equal(off.status, 200);
  t.equal(off.json.module_id, 'color_liveness');
  t.equal(off.json.enabled, false);
  const { token } = await makeApiToken([['color_liveness', 5, 'day']]);
  t.same((await (await fetch(`${base}/v1/modules`, { headers: bearer(token) })).json()).modules, [{ module_id: 'color_liveness', status: 'disabled' }]);
  t.equal((await admin('PATCH', '/admin/api/modules/color_liveness', { enabled: true })).json.enabled, true);
  const unknown = await admin('PATCH', '/admin/api/modules/face_liveness', { enabled: true });
  t.equal(unknown.status, 404);
  t.equal(unknown.json.error.code, 'not_found');
});

t.test('users: create, duplicate 409, change, unknown 404, the last admin stays', async (t) => {
  const made = await admin('POST', '/admin/api/users', { username: 'alice', password: 'alice password', role: 'admin', current_password: 'correct horse battery' });
  t.equal(made.status, 201);
  t.same(Object.keys(made.json).sort(), ['created_at', 'enabled', 'id', 'role', 'username']);
  t.equal((await admin('POST', '/admin/api/users', { username: 'alice', password: 'other password', role: 'user' })).status, 409);
  const listed = (await admin('GET', '/admin/api/users')).json.users;
  t.ok(listed.some((u: any) => u.username === 'alice'));
  t.notOk(JSON.stringify(listed).includes('scrypt'), 'no password hashes');
  const changed = await admin('PATCH', `/admin/api/users/${made.json.id}`, { password: 'new alice password', current_password: 'correct horse battery' });
  t.equal(changed.status, 200);
  t.equal((await login(base, 'alice', 'new alice password')).body.username, 'alice');
  t.equal((await admin('PATCH', '/admin/api/users/usr_nope', { enabled: false })).status, 404);

  t.equal((await admin('PATCH', `/admin/api/users/${made.json.id}`, { enabled: false, current_password: 'correct horse battery' })).status, 200);
  const me = listed.find((u: any) => u.username === 'root');
  const last = await admin('PATCH', `/admin/api/users/${me.id}`, { role: 'user', current_password: 'correct horse battery' });
  t.equal(last.status, 409, 'demoting the last enabled admin is refused');
  t.equal((await admin('GET', '/auth/session')).status, 200);
});

t.test('tokens: the plaintext is in the create answer only', async (t) => {
  const r = await admin('POST', '/admin/api/tokens', {
    name: 'kiosk',
    expires_at: '2027-01-01T00:00:00Z',
    demo: true,
    grants: [{ module_id: 'rgb_liveness', limit: 100, period: 'day' }, { module_id: 'color_liveness', limit: null, period: 'never' }],
  });
  t.equal(r.status, 201);
  const plain = r.json.token as string;
  t.match(plain, /^lvk_[A-Za-z0-9_-]{43}$/);
  t.hasStrict(r.json, { name: 'kiosk', enabled: true, demo: true, revoked: false, expires_at: '2027-01-01T00:00:00.000Z', token_prefix: plain.slice(0, 12) });
  t.same(r.json.grants, [{ module_id: 'color_liveness', limit: null, period: 'never' }, { module_id: 'rgb_liveness', limit: 100, period: 'day' }]);
  t.notOk('hash' in r.json);
  const id = r.json.id;

  const me = await fetch(`${base}/v1/me`, { headers: bearer(plain) });
  t.equal(me.status, 200, 'the plaintext works on /v1');

  const list = await admin('GET', '/admin/api/tokens');
  const detail = await admin('GET', `/admin/api/tokens/${id}`);
  for (const [name, res] of [['list', list], ['detail', detail]] as const) {
    t.notOk(res.text.includes(plain), `${name} never carries the plaintext`);
    t.notOk(res.text.includes(plain.slice(12)), `${name} carries no part beyond the prefix`);
    t.notOk(/"(hash|token)"\s*:/.test(res.text), `${name} has no hash or token field`);
  }
  t.same(detail.json.usage.map((u: any) => [u.module_id, u.used]), [['color_liveness', 0], ['rgb_liveness', 0]]);
  t.equal((await admin('GET', '/admin/api/tokens/tok_nope')).status, 404);
});

t.test('tokens: change, disable, expire and revoke for good', async (t) => {
  const { json: tok } = await admin('POST', '/admin/api/tokens', { name: 'temp', grants: [{ module_id: 'rgb_liveness', limit: 5, period: 'day' }] });
  const me = () => fetch(`${base}/v1/me`, { headers: bearer(tok.token) }).then((r) => r.status);
  t.equal(await me(), 200);
  const off = await admin('PATCH', `/admin/api/tokens/${tok.id}`, { enabled: false, name: 'temp2' });
  t.hasStrict(off.json, { enabled: false, name: 'temp2' });
  t.equal(await me(), 401);
  t.equal((await admin('PATCH', `/admin/api/tokens/${tok.id}`, { enabled: true })).status, 200);
  t.equal(await me(), 200);
  t.equal((await admin('PATCH', `/admin/api/tokens/${tok.id}`, { expires_at: new Date(AT - 1000).toISOString() })).status, 200);
  t.equal(await me(), 401, 'expired');
  t.equal((await admin('PATCH', `/admin/api/tokens/${tok.id}`, { expires_at: null })).json.expires_at, null);
  t.equal(await me(), 200);
  const del = await admin('DELETE', `/admin/api/tokens/${tok.id}`);
  t.equal(del.status, 204);
  t.equal(del.text, '');
  t.equal(await me(), 401);
  const reenable = await admin('PATCH', `/admin/api/tokens/${tok.id}`, { enabled: true });
  t.equal(reenable.status, 409, 'a revoked token cannot be enabled');
  t.equal(reenable.json.error.code, 'conflict');
  const renamed = await admin('PATCH', `/admin/api/tokens/${tok.id}`, { name: 'retired' });
  t.equal(renamed.status, 200, 'other fields may still change');
  t.hasStrict(renamed.json, { name: 'retired', enabled: false, revoked: true });
  t.equal(await me(), 401, 'a revoked token stays dead');
  t.equal((await admin('DELETE', '/admin/api/tokens/tok_nope')).status, 404);
});

t.test('grants: PUT and DELETE keep the period usage', async (t) => {
  const { json: tok } = await admin('POST', '/admin/api/tokens', { name: 'metered', grants: [{ module_id: 'rgb_liveness', limit: 10, period: 'day' }] });
  await charge(tok.id, 'rgb_liveness', 3);
  const used = async () => (await admin('GET', `/admin/api/tokens/${tok.id}`)).json.usage.find((u: any) => u.module_id === 'rgb_liveness');
  t.hasStrict(await used(), { used: 3, remaining: 7, limit: 10 });

  const put = await admin('PUT', `/admin/api/tokens/${tok.id}/grants/rgb_liveness`, { limit: 4, period: 'day' });
  t.equal(put.status, 200);
  t.same(put.json, { module_id: 'rgb_liveness', limit: 4, period: 'day' });
  t.hasStrict(await used(), { used: 3, remaining: 1, limit: 4 }, 'a lower limit keeps the usage');

  t.equal((await admin('DELETE', `/admin/api/tokens/${tok.id}/grants/rgb_liveness`)).status, 204);
  t.same((await admin('GET', `/admin/api/tokens/${tok.id}`)).json.grants, []);
  t.equal((await admin('DELETE', `/admin/api/tokens/${tok.id}/grants/rgb_liveness`)).status, 404, 'no grant to remove');
  t.equal((await admin('PUT', `/admin/api/tokens/${tok.id}/grants/rgb_liveness`, { limit: 10, period: 'day' })).status, 200);
  t.hasStrict(await used(), { used: 3, remaining: 7 }, 'a re-grant keeps the period usage');

  t.equal((await admin('PUT', `/admin/api/tokens/${tok.id}/grants/rgb_liveness`, { limit: null, period: 'never' })).status, 200);
  t.hasStrict(await used(), { used: 3, remaining: null, reset_at: null });
  t.equal((await admin('PUT', `/admin/api/tokens/tok_nope/grants/rgb_liveness`, { limit: 1, period: 'day' })).status, 404);
  t.equal((await admin('PUT', `/admin/api/tokens/${tok.id}/grants/face_liveness`, { limit: 1, period: 'day' })).status, 404);
});

t.test('usage and audit: filtered, paged with next_cursor', async (t) => {
  const a = (await makeApiToken([['rgb_liveness', null, 'never'], ['color_liveness', null, 'never']])).id;
  const b = (await makeApiToken([['rgb_liveness', null, 'never']])).id;
  const day = 86_400_000;
  for (let i = 0; i < 5; i++) await charge(a, 'rgb_liveness', 1, AT + 100 * day + i * 1000);
  await charge(a, 'color_liveness', 2, AT + 101 * day);
  await charge(b, 'rgb_liveness', 4, AT + 102 * day);
  const from = new Date(AT + 100 * day).toISOString();

  const seen: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await admin('GET', `/admin/api/usage?token_id=${a}&from=${from}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    t.ok(r.json.items.length <= 2);
    seen.push(...r.json.items);
    cursor = r.json.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  t.equal(seen.length, 6, 'every entry of the token once');
  t.equal(new Set(seen.map((e) => e.id)).size, 6);
  t.ok(seen.every((e) => e.token_id === a && e.kind === 'charge'));
  t.same(seen.map((e) => e.at), [...seen.map((e) => e.at)].sort(), 'in time order');

  const color = await admin('GET', `/admin/api/usage?module_id=color_liveness&from=${from}`);
  t.same(color.json.items.map((e: any) => [e.token_id, e.units]), [[a, 2]]);
  const window = await admin('GET', `/admin/api/usage?from=${new Date(AT + 101 * day).toISOString()}&to=${new Date(AT + 102 * day).toISOString()}`);
  t.same(window.json.items.map((e: any) => e.units), [2], 'from inclusive, to exclusive');

  for (const q of ['limit=0', 'limit=abc', 'from=yesterday', 'cursor=%7B%7D', 'colour=red']) {
    const r = await admin('GET', `/admin/api/usage?${q}`);
    t.equal(r.status, 422, q);
    t.equal(r.json.detail[0].loc[0], 'query');
  }

  const audit = await admin('GET', '/admin/api/audit?limit=1');
  t.equal(audit.status, 200);
  t.ok(Array.isArray(audit.json.items));
  t.ok('next_cursor' in audit.json);
});

t.test('settlements: list those needing an operator, resolve once', async (t) => {
  const { id } = await makeApiToken([['rgb_liveness', 10, 'day']]);
  const r = await charge(id, 'rgb_liveness', 2);
  const inflight = await charge(id, 'rgb_liveness', 1);
  await atomically(store, () => markFailedWrites(store, r.id, null)); // as a settlement that could not be written marks it
  const list = await admin('GET', '/admin/api/settlements');
  t.equal(list.status, 200);
  t.same(list.json.settlements.map((s: any) => s.id), [r.id], 'a pending (in flight) reservation is not listed');
  t.equal((await admin('POST', `/admin/api/settlements/${inflight.id}/resolve`, { action: 'refund' })).status, 409, 'nor resolvable');

  const used = async () => (await admin('GET', `/admin/api/tokens/${id}`)).json.usage[0].used;
  t.equal(await used(), 3);
  const refundedMetric = async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    return [...text.matchAll(/^lv_units_total\{[^}]*kind="refunded"[^}]*\} (\d+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
  };
  const refundedBefore = await refundedMetric();
  const done = await admin('POST', `/admin/api/settlements/${r.id}/resolve`, { action: 'refund' });
  t.equal(done.status, 200);
  t.equal(await refundedMetric(), refundedBefore + 2, 'the operator refund is counted in lv_units_total{kind="refunded"}');
  t.hasStrict(done.json, { id: r.id, state: 'refunded', units: 2 });
  t.equal(await used(), 1, 'the refund gave the units back');
  t.equal((await admin('POST', `/admin/api/settlements/${r.id}/resolve`, { action: 'charge' })).status, 409, 'resolved once only');
  t.same((await admin('GET', '/admin/api/settlements')).json.settlements, []);
  t.equal((await admin('POST', '/admin/api/settlements/rsv_nope/resolve', { action: 'charge' })).status, 404);
});

t.test('settlements: two operators resolving the same record at once, only one takes effect', async (t) => {
  const { id } = await makeApiToken([['rgb_liveness', 10, 'day']]);
  const used = async () => (await admin('GET', `/admin/api/tokens/${id}`)).json.usage[0].used;
  for (let round = 0; round < 4; round++) {
    const r = await charge(id, 'rgb_liveness', 1);
    await atomically(store, () => markFailedWrites(store, r.id, null)); // as a settlement that could not be written marks it
    const before = await used();
    const [a, b] = await Promise.all([
      admin('POST', `/admin/api/settlements/${r.id}/resolve`, { action: round % 2 ? 'refund' : 'charge' }),
      admin('POST', `/admin/api/settlements/${r.id}/resolve`, { action: round % 2 ? 'charge' : 'refund' }),
    ]);
    t.same([a.status, b.status].sort(), [200, 409], `round ${round}: one resolution wins, the other is refused`);
    const winner = a.status === 200 ? a : b;
    const state = (store.db.reservations.get(r.id) as any).state;
    t.equal(winner.json.state, state, 'the winning answer tells the state that was stored');
    t.equal(await used(), state === 'refunded' ? before - 1 : before, 'usage follows the stored state');
  }
});

t.test('body types: JSON, a +json type or none is read; any other type is 422 at the body', async (t) => {
  // A Uint8Array body makes fetch send no Content-Type at all (a string would be text/plain).
  const send = (path: string, type: string | null, body: unknown, headers: Record<string, string> = { cookie: session.cookie, 'x-csrf-token': session.csrf }) =>
    fetch(`${base}${path}`, { method: path === '/auth/login' ? 'POST' : 'PATCH', headers: { ...headers, ...(type === null ? {} : { 'content-type': type }) }, body: new TextEncoder().encode(JSON.stringify(body)) });
  for (const type of [null, 'application/json', 'application/json; charset=utf-8', 'application/merge-patch+json']) {
    const r = await send('/admin/api/modules/color_liveness', type, { enabled: true });
    t.equal(r.status, 200, `${type ?? 'no Content-Type'}: read as JSON`);
    await r.arrayBuffer();
  }
  for (const type of ['text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonp']) {
    const r = await send('/admin/api/modules/color_liveness', type, { enabled: true });
    t.equal(r.status, 422, `${type}: 422`);
    t.match(await r.json(), { detail: [{ loc: ['body'], type: 'json_type', input: type }] });
  }
  const noType = await send('/auth/login', null, { username: 'root', password: 'correct horse battery' }, {});
  t.equal(noType.status, 200, 'login without a Content-Type is read as JSON');
  await noType.arrayBuffer();
  const form = await send('/auth/login', 'text/plain', { username: 'root', password: 'correct horse battery' }, {});
  t.equal(form.status, 422, 'a login posted as text/plain (what a cross-site form can send) is refused');
  t.notOk(form.headers.get('set-cookie'), 'and starts no session');
});

t.test('state-changing calls are logged with the operator who made them', async (t) => {
  const r = await admin('PATCH', '/admin/api/modules/rgb_liveness', { enabled: true });
  const line = await waitFor(() => server.logLines().find((l) => l.msg === 'admin action' && l.request_id === r.headers.get('x-request-id')), { what: 'the admin action log line' }).catch(() => undefined);
  t.hasStrict(line, { admin: 'root', method: 'PATCH', path: '/admin/api/modules/rgb_liveness' });
  t.notOk(server.logs.join('\n').includes(session.cookie.split('=')[1]!), 'the session id is never logged');
  t.notOk(server.logs.join('\n').includes(session.csrf), 'nor the CSRF token');
});

t.test('overview: slots, models, settlements and the grants nearing their limits', async (t) => {
  const near = await makeApiToken([['rgb_liveness', 5, 'never']]);
  const far = await makeApiToken([['rgb_liveness', 100, 'never']]);
  for (let i = 0; i < 4; i++) await charge(near.id, 'rgb_liveness', 1);
  await charge(far.id, 'rgb_liveness', 1);
  const r = await admin('GET', '/admin/api/overview');
  t.equal(r.status, 200);
  t.equal(r.json.last_hour.length, 60);
  t.equal(r.json.last_day.length, 24);
  t.match(r.json.slots, { total: Number, in_use: 0 });
  t.same(r.json.modules.map((m: any) => m.module_id), ['rgb_liveness', 'color_liveness']);
  t.type(r.json.pending_settlements, 'number');
  const mine = r.json.near_limit.filter((n: any) => n.token_id === near.id || n.token_id === far.id);
  t.match(mine, [{ token_id: near.id, module_id: 'rgb_liveness', used: 4, limit: 5, period: 'never', reset_at: null }], 'only the grant at 80 %');
  t.equal((await client(base, undefined)('GET', '/admin/api/overview')).status, 401, 'behind the guard');
});

t.test('model sets and stored results for the console', async (t) => {
  const sets = await admin('GET', '/admin/api/model-sets');
  t.equal(sets.status, 200);
  t.match(sets.json, { active: 'raw_v1', sets: [{ model_set: 'bgr80_ensemble_v1', trained: false }, { model_set: 'raw_v1', trained: false, calibration: null }] });
  t.same(Object.keys(sets.json.sets[1].modules), ['rgb_liveness', 'color_liveness']);
  t.equal((await admin('GET', '/admin/api/model-sets/raw_v1/det.svg')).status, 404, 'no calibration yet: no plot');
  t.equal((await admin('GET', '/admin/api/results/nope')).status, 404);
  // a settled reservation's results (written by settle, as a verify call does)
  const tok = await makeApiToken([['rgb_liveness', 5, 'never']]);
  const rsv = await charge(tok.id, 'rgb_liveness', 1);
  const { settle } = await import('../../src/store/lmdb/index.ts');
  await settle(store, rsv, AT, () => '{}', [{ capture_id: 'c-1', mode: 'rgb_single', status: 'ok', alive: true, score: 0.9 }]);
  const r = await admin('GET', `/admin/api/results/${rsv.request_id}`);
  t.equal(r.status, 200);
  t.match(r.json, { request_id: rsv.request_id, token_id: tok.id, module_id: 'rgb_liveness', results: [{ capture_id: 'c-1', score: 0.9 }] });
  t.equal((await client(base, undefined)('GET', `/admin/api/results/${rsv.request_id}`)).status, 401, 'behind the guard');
});
