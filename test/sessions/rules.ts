import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { request, single, color, postVerify } from '../helpers/captures.ts';
import { waitFor } from '../helpers/wait.ts';
import { client, login } from '../auth/session-client.ts';

// Every rule of issue 26 (device sessions) over real HTTP through the service's app and engine
// in process (test/helpers/api.ts; each file was one server start); run against LMDB
// (lmdb.test.ts) and PostgreSQL (postgres.test.ts) with the same service settings (ENV).
// Time moves with the test clock (CLOCK_FILE), never by waiting.

export const ADMIN = { username: 'root', password: 'correct horse battery' };
export const ENV = {
  ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password,
  SESSION_MINT_LIMIT: '4', SESSION_MINT_WINDOW_SECONDS: '60', SESSION_MAX_TTL_SECONDS: '600', SESSION_MAX_CAPTURES: '10',
  TEST_INFERENCE_FAIL_PREFIX: 'fail-', TEST_SETTLEMENT_FAIL_PREFIX: 'sfail-',
};
export const START = '2026-06-10T08:00:00.000Z';

export interface Setup {
  server: { baseUrl: string };
  clock: { now(): number; set(ms: number): void };
  /** whether the store holds `text` anywhere (the plaintext of a session token must not be) */
  storeHolds(text: string): Promise<boolean>;
}

type Json = any;

export function sessionRules(t: Test, { server, clock, storeHolds }: Setup): void {
  const base = server.baseUrl;
  let admin: ReturnType<typeof client>;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const call = async (method: string, path: string, token: string | null, body?: unknown) => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token ? bearer(token) : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let json: Json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: r.status, headers: r.headers, json, text };
  };
  const parent = async (grants = [{ module_id: 'rgb_liveness', limit: 100, period: 'day' }], extra: Record<string, unknown> = {}) => {
    const r = await admin('POST', '/admin/api/tokens', { name: `fleet-${randomUUID()}`, grants, ...extra });
    if (r.status !== 201) throw new Error(`token create: ${r.text}`);
    return { id: r.json.id as string, token: r.json.token as string };
  };
  const mint = async (token: string, body: Record<string, unknown> = { module_id: 'rgb_liveness' }) => {
    const r = await call('POST', '/v1/sessions', token, body);
    if (r.status !== 201) throw new Error(`mint: ${r.status} ${r.text}`);
    return r.json as { session_id: string; session_token: string; module_id: string; expires_at: string; max_captures: number };
  };
  const used = async (token: string) => (await call('GET', '/v1/me', token)).json.usage.find((u: Json) => u.module_id === 'rgb_liveness').used as number;
  const one = (id = `c-${randomUUID()}`) => request([single({ id, seed: 3 })]);
  const two = () => request([single({ id: `a-${randomUUID()}`, seed: 4 }), single({ id: `b-${randomUUID()}`, seed: 5 })]);

  t.before(async () => {
    admin = client(base, await login(base, ADMIN.username, ADMIN.password));
  });

  t.test('mint: 201 with an lvs_ token shown once, defaults, limits, the parent\'s expiry; only a business token with the grant mints', async (t) => {
    const p = await parent([{ module_id: 'rgb_liveness', limit: 100, period: 'day' }], { expires_at: new Date(clock.now() + 120_000).toISOString() });
    const s = await mint(p.token);
    t.match(s, { session_id: /^ses_[A-Za-z0-9_-]{12}$/, session_token: /^lvs_[A-Za-z0-9_-]{43}$/, module_id: 'rgb_liveness', max_captures: 3 });
    t.equal(s.expires_at, new Date(clock.now() + 120_000).toISOString(), 'the default 300 s cut to the parent token\'s expiry');
    t.notOk(await storeHolds(s.session_token), 'the store keeps the hash, never the plaintext');
    const status = await call('GET', `/v1/sessions/${s.session_id}`, p.token);
    t.notMatch(status.text, s.session_token, 'and never shows it again');

    const q = await parent();
    const big = await mint(q.token, { module_id: 'rgb_liveness', ttl_seconds: 86_400, max_captures: 10_000 });
    t.equal(big.expires_at, new Date(clock.now() + 600_000).toISOString(), 'SESSION_MAX_TTL_SECONDS');
    t.equal(big.max_captures, 10, 'SESSION_MAX_CAPTURES');
    const exact = await mint(q.token, { module_id: 'rgb_liveness', ttl_seconds: 30, max_captures: 1 });
    t.equal(exact.expires_at, new Date(clock.now() + 30_000).toISOString());

    t.match(await call('POST', '/v1/sessions', q.token, { module_id: 'color_liveness' }), { status: 403, json: { error: { code: 'module_forbidden' } } });
    t.match(await call('POST', '/v1/sessions', q.token, { module_id: 'rgb_liveness', ttl_seconds: 0 }), { status: 422, json: { detail: [{ loc: ['body', 'ttl_seconds'] }] } });
    t.match(await call('POST', '/v1/sessions', q.token, { module_id: 'rgb_liveness', extra: 1 }), { status: 422 });
    t.match(await call('POST', '/v1/sessions', null, { module_id: 'rgb_liveness' }), { status: 401, json: { error: { code: 'invalid_token' } } });
    t.match(await call('POST', '/v1/sessions', exact.session_token, { module_id: 'rgb_liveness' }), { status: 403, json: { error: { code: 'session_not_allowed' } } }, 'a session cannot mint');
    const both = await parent([{ module_id: 'rgb_liveness', limit: 100, period: 'day' }, { module_id: 'color_liveness', limit: 100, period: 'day' }]);
    t.equal((await admin('PATCH', '/admin/api/modules/color_liveness', { enabled: false })).status, 200);
    t.teardown(() => admin('PATCH', '/admin/api/modules/color_liveness', { enabled: true }));
    t.match(await call('POST', '/v1/sessions', both.token, { module_id: 'color_liveness' }), { status: 403, json: { error: { code: 'module_disabled' } } });
  });

  t.test('minting is rate-limited per parent token (SESSION_MINT_LIMIT per SESSION_MINT_WINDOW_SECONDS)', async (t) => {
    const p = await parent();
    const other = await parent();
    for (let i = 0; i < 4; i++) await mint(p.token);
    const refused = await call('POST', '/v1/sessions', p.token, { module_id: 'rgb_liveness' });
    t.match(refused, { status: 429, json: { error: { code: 'session_rate_limited' } } });
    t.equal(refused.headers.get('retry-after'), '60');
    await mint(other.token);
    clock.set(clock.now() + 60_000);
    await mint(p.token);
  });

  // review3 (time): the host's clock stepped back an hour after a parent's mints reached the
  // limit. Counted, those mints refused it for the window plus the step (Retry-After 3660);
  // their age is unknown, so they no longer count (src/store/device-sessions.ts mintRefusal).
  t.test('mints stamped after the clock (a clock stepped back) do not count against the limit', async (t) => {
    const p = await parent();
    for (let i = 0; i < 4; i++) await mint(p.token);
    t.equal((await call('POST', '/v1/sessions', p.token, { module_id: 'rgb_liveness' })).status, 429, 'the limit is reached');
    const at = clock.now();
    clock.set(at - 3_600_000);
    t.teardown(() => clock.set(at + 60_000));
    await mint(p.token);
    t.pass('an hour earlier by the clock, a mint is served');
    for (let i = 0; i < 3; i++) await mint(p.token);
    const refused = await call('POST', '/v1/sessions', p.token, { module_id: 'rgb_liveness' });
    t.match(refused, { status: 429, json: { error: { code: 'session_rate_limited' } } }, 'the limit holds among the mints the clock can place');
    t.equal(refused.headers.get('retry-after'), '60', 'and its wait is at most the window');
  });

  t.test('a session verifies its own module, charging the parent\'s quota, and reads GET /v1/me; nothing else', async (t) => {
    const p = await parent([{ module_id: 'rgb_liveness', limit: 100, period: 'day' }, { module_id: 'color_liveness', limit: 100, period: 'day' }]);
    const s = await mint(p.token, { module_id: 'rgb_liveness', max_captures: 5 });
    const r = await postVerify(base, s.session_token, 'rgb_liveness', one());
    t.equal(r.status, 200, r.text);
    t.ok(r.headers.get('x-verdict-signature'), 'signed like any verify answer');
    t.equal(await used(p.token), 1, 'the parent token\'s quota is charged');
    const me = await call('GET', '/v1/me', s.session_token);
    t.same(me.json, { session: { session_id: s.session_id, module_id: 'rgb_liveness', state: 'active', expires_at: s.expires_at, max_captures: 5, captures_used: 1, captures_left: 4 } });
    t.notMatch(me.text, p.id, 'the device learns nothing of the business token');

    const otherModule = await postVerify(base, s.session_token, 'color_liveness', request([color({ id: 'col' })]));
    t.match(otherModule, { status: 403, json: { error: { code: 'session_not_allowed' } } }, 'another module');
    for (const [method, path] of [['GET', '/v1/modules'], ['GET', `/v1/sessions/${s.session_id}`], ['DELETE', `/v1/sessions/${s.session_id}`]] as const) {
      t.match(await call(method, path, s.session_token), { status: 403, json: { error: { code: 'session_not_allowed' } } }, `${method} ${path}`);
    }
    t.match(await call('GET', '/admin/api/tokens', s.session_token), { status: 401, json: { error: { code: 'invalid_session' } } }, '/admin');
    t.match(await call('GET', '/auth/session', s.session_token), { status: 401, json: { error: { code: 'invalid_session' } } }, '/auth');
    t.equal(await used(p.token), 1, 'refused calls charged nothing');
    t.equal((await call('GET', `/v1/sessions/${s.session_id}`, p.token)).json.captures_used, 1);
    // a string that names no session is an unknown bearer token, refused as before sessions
    const unknown = `lvs_${'A'.repeat(43)}`;
    t.match(await postVerify(base, unknown, 'rgb_liveness', one()), { status: 401, json: { error: { code: 'invalid_token' } } });
    t.match(await call('GET', '/v1/modules', unknown), { status: 401, json: { error: { code: 'invalid_token' } } });
    t.match(await call('GET', '/v1/me', unknown), { status: 401, json: { error: { code: 'invalid_token' } } });
  });

  t.test('max_captures: counted in the reservation; a call that would pass it is refused whole with 429, nothing charged', async (t) => {
    const p = await parent();
    const s = await mint(p.token, { module_id: 'rgb_liveness', max_captures: 3 });
    t.equal((await postVerify(base, s.session_token, 'rgb_liveness', two())).status, 200);
    const over = await postVerify(base, s.session_token, 'rgb_liveness', two());
    t.match(over, { status: 429, json: { error: { code: 'session_captures_exceeded', message: /2 captures .* 1 of 3 left/ } } });
    t.equal(await used(p.token), 2, 'the parent was not charged for the refused call');
    t.equal((await postVerify(base, s.session_token, 'rgb_liveness', one())).status, 200, 'the last capture fits');
    t.match(await postVerify(base, s.session_token, 'rgb_liveness', one()), { status: 429, json: { error: { code: 'session_captures_exceeded' } } });
    const status = (await call('GET', `/v1/sessions/${s.session_id}`, p.token)).json;
    t.match(status, { state: 'exhausted', captures_used: 3, max_captures: 3 });
    t.equal(await used(p.token), 3);
    t.equal((await postVerify(base, p.token, 'rgb_liveness', one())).status, 200, 'the business token itself is not bound by the session');
  });

  t.test('idempotency keys belong to the parent token: the device\'s retry replays, even once the session is used up', async (t) => {
    const p = await parent();
    const s = await mint(p.token, { module_id: 'rgb_liveness', max_captures: 1 });
    const body = one();
    const key = { 'idempotency-key': `dev-${randomUUID()}` };
    const first = await postVerify(base, s.session_token, 'rgb_liveness', body, key);
    t.equal(first.status, 200);
    const again = await postVerify(base, s.session_token, 'rgb_liveness', body, key);
    t.equal(again.status, 200);
    t.equal(again.headers.get('idempotency-replayed'), 'true');
    t.equal(again.text, first.text, 'byte for byte');
    const byParent = await postVerify(base, p.token, 'rgb_liveness', body, key);
    t.equal(byParent.headers.get('idempotency-replayed'), 'true', 'the same key under the business token is the same call');
    t.match(await postVerify(base, s.session_token, 'rgb_liveness', one(), key), { status: 409, json: { error: { code: 'idempotency_conflict' } } });
    t.equal(await used(p.token), 1);
  });

  t.test('GET /v1/sessions/{id}: the parent reads state and each verify\'s results exactly as answered; any other token 404', async (t) => {
    const p = await parent();
    const s = await mint(p.token, { module_id: 'rgb_liveness', max_captures: 4 });
    const a = await postVerify(base, s.session_token, 'rgb_liveness', one());
    const b = await postVerify(base, s.session_token, 'rgb_liveness', two());
    const failed = await postVerify(base, s.session_token, 'rgb_liveness', request([single({ id: `fail-${randomUUID()}` })]));
    t.match(failed, { status: 500, json: { error: { code: 'inference_failed' } } });
    const status = await call('GET', `/v1/sessions/${s.session_id}`, p.token);
    t.equal(status.status, 200);
    t.match(status.json, { session_id: s.session_id, module_id: 'rgb_liveness', state: 'active', expires_at: s.expires_at, revoked_at: null, max_captures: 4, captures_used: 3 });
    t.same(status.json.results, [
      { request_id: a.json.request_id, status: 'completed', charged_units: 1, results: a.json.results },
      { request_id: b.json.request_id, status: 'completed', charged_units: 2, results: b.json.results },
      { request_id: failed.json.request_id, status: 'refunded', charged_units: 0, results: null },
    ], 'the refunded call gave its capture back');
    const other = await parent();
    t.match(await call('GET', `/v1/sessions/${s.session_id}`, other.token), { status: 404, json: { error: { code: 'session_not_found' } } });
    t.match(await call('DELETE', `/v1/sessions/${s.session_id}`, other.token), { status: 404, json: { error: { code: 'session_not_found' } } });
    t.match(await call('GET', '/v1/sessions/ses_AAAAAAAAAAAA', p.token), { status: 404, json: { error: { code: 'session_not_found' } } });
    t.match(await call('GET', `/v1/sessions/${encodeURIComponent('ses_\u0000x')}`, p.token), { status: 404 });
    t.match(await call('GET', `/v1/sessions/${s.session_id}`, null), { status: 401, json: { error: { code: 'invalid_token' } } });
  });

  t.test('a call whose settlement failed, charged by the operator: the parent reads the results the device\'s retry replays', async (t) => {
    const p = await parent();
    const s = await mint(p.token, { module_id: 'rgb_liveness', max_captures: 2 });
    const body = request([single({ id: `sfail-${randomUUID()}`, seed: 6 })]);
    const key = { 'idempotency-key': `k-${randomUUID()}` };
    const failed = await postVerify(base, s.session_token, 'rgb_liveness', body, key);
    t.match(failed, { status: 500, json: { error: { code: 'settlement_failed' } } });
    const held = await call('GET', `/v1/sessions/${s.session_id}`, p.token);
    t.match(held.json.results, [{ request_id: failed.json.request_id, status: 'settlement_failed', charged_units: 1, results: null }], 'held for the operator');
    const listed = (await admin('GET', '/admin/api/settlements')).json.settlements.find((x: Json) => x.request_id === failed.json.request_id);
    t.match(listed, { has_saved_answer: true });
    t.equal((await admin('POST', `/admin/api/settlements/${listed.id}/resolve`, { action: 'charge' })).status, 200);
    const replay = await postVerify(base, s.session_token, 'rgb_liveness', body, key);
    t.equal(replay.status, 200);
    t.equal(replay.headers.get('idempotency-replayed'), 'true');
    t.equal(replay.json.results.length, 1);
    const status = await call('GET', `/v1/sessions/${s.session_id}`, p.token);
    t.same(status.json.results, [{ request_id: failed.json.request_id, status: 'completed', charged_units: 1, results: replay.json.results }],
      'the verdict the call could not save is read as the replay gives it, not completed without results');
    t.equal((await admin('GET', `/admin/api/results/${failed.json.request_id}`)).status, 200, 'and the console shows them');
  });

  t.test('DELETE revokes at once; expiry follows the clock', async (t) => {
    const p = await parent();
    const s = await mint(p.token);
    t.equal((await call('DELETE', `/v1/sessions/${s.session_id}`, p.token)).status, 204);
    t.equal((await call('DELETE', `/v1/sessions/${s.session_id}`, p.token)).status, 204, 'again: still revoked');
    t.match(await postVerify(base, s.session_token, 'rgb_liveness', one()), { status: 401, json: { error: { code: 'invalid_session_token' } } });
    t.match(await call('GET', '/v1/me', s.session_token), { status: 401, json: { error: { code: 'invalid_session_token' } } });
    t.match((await call('GET', `/v1/sessions/${s.session_id}`, p.token)).json, { state: 'revoked', revoked_at: new Date(clock.now()).toISOString() });

    const e = await mint(p.token, { module_id: 'rgb_liveness', ttl_seconds: 60 });
    clock.set(clock.now() + 59_999);
    t.equal((await call('GET', '/v1/me', e.session_token)).status, 200, 'a millisecond before its end');
    clock.set(clock.now() + 1);
    t.match(await postVerify(base, e.session_token, 'rgb_liveness', one()), { status: 401, json: { error: { code: 'invalid_session_token' } } });
    t.match((await call('GET', `/v1/sessions/${e.session_id}`, p.token)).json, { state: 'expired', results: [] });
    t.equal(await used(p.token), 0);
  });

  t.test('the parent revoked, disabled or expired: its sessions answer 401 at once', async (t) => {
    for (const change of ['disable', 'revoke', 'expire'] as const) {
      const p = await parent();
      const s = await mint(p.token);
      t.equal((await call('GET', '/v1/me', s.session_token)).status, 200);
      if (change === 'disable') t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { enabled: false })).status, 200);
      if (change === 'revoke') t.equal((await admin('DELETE', `/admin/api/tokens/${p.id}`)).status, 204);
      if (change === 'expire') t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { expires_at: new Date(clock.now() + 1000).toISOString() })).status, 200);
      if (change === 'expire') clock.set(clock.now() + 1000);
      t.match(await postVerify(base, s.session_token, 'rgb_liveness', one()), { status: 401, json: { error: { code: 'invalid_session_token' } } }, `${change}: verify`);
      t.match(await call('GET', '/v1/me', s.session_token), { status: 401, json: { error: { code: 'invalid_session_token' } } }, `${change}: me`);
    }
  });

  t.test('disabling or expiring the parent ends its sessions: enabling it again brings none back (issue 40)', async (t) => {
    for (const change of ['disable', 'expire'] as const) {
      const p = await parent();
      const s = await mint(p.token);
      t.equal((await call('GET', '/v1/me', s.session_token)).status, 200);
      if (change === 'disable') {
        t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { enabled: false })).status, 200);
        t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { enabled: true })).status, 200);
      } else {
        t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { expires_at: new Date(clock.now()).toISOString() })).status, 200);
        t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { expires_at: null })).status, 200);
      }
      t.equal((await call('GET', '/v1/me', p.token)).status, 200, `${change} and back: the parent works again`);
      t.match(await call('GET', '/v1/me', s.session_token), { status: 401, json: { error: { code: 'invalid_session_token' } } }, `${change} and back: the session stays dead`);
      t.match(await postVerify(base, s.session_token, 'rgb_liveness', one()), { status: 401, json: { error: { code: 'invalid_session_token' } } });
      t.match((await call('GET', `/v1/sessions/${s.session_id}`, p.token)).json, { state: 'revoked', revoked_at: new Date(clock.now()).toISOString() }, 'it reads revoked');
      t.same((await admin('GET', `/admin/api/tokens/${p.id}/sessions`)).json.sessions, [], 'the console lists none');
      const fresh = await mint(p.token);
      t.equal((await call('GET', '/v1/me', fresh.session_token)).status, 200, 'a session minted afterwards works');
      t.equal(await used(p.token), 0, 'nothing was charged');
    }
  });

  t.test('the parent\'s expiry moved earlier: its sessions read that expiry, and once it has passed none is listed', async (t) => {
    const p = await parent();
    const s = await mint(p.token, { module_id: 'rgb_liveness', ttl_seconds: 600 });
    const earlier = new Date(clock.now() + 60_000).toISOString();
    t.equal((await admin('PATCH', `/admin/api/tokens/${p.id}`, { expires_at: earlier })).status, 200);
    t.equal((await call('GET', `/v1/sessions/${s.session_id}`, p.token)).json.expires_at, earlier, 'the backend reads the token\'s expiry (it read the session\'s own, 9 minutes later)');
    t.equal((await call('GET', '/v1/me', s.session_token)).json.session.expires_at, earlier, 'and so does the device');
    t.same((await admin('GET', `/admin/api/tokens/${p.id}/sessions`)).json.sessions.map((x: Json) => [x.session_id, x.expires_at, x.state]), [[s.session_id, earlier, 'active']], 'and the console');
    clock.set(clock.now() + 61_000);
    t.match(await call('GET', '/v1/me', s.session_token), { status: 401 }, 'the session is dead with its token');
    t.same((await admin('GET', `/admin/api/tokens/${p.id}/sessions`)).json.sessions, [], 'and no longer listed as active (it was, with its own expires_at)');
  });

  t.test('audit lines carry the session id; the console lists a token\'s active sessions; /metrics counts them', async (t) => {
    const p = await parent();
    const s = await mint(p.token);
    const gone = await mint(p.token);
    await call('DELETE', `/v1/sessions/${gone.session_id}`, p.token);
    const bySession = await postVerify(base, s.session_token, 'rgb_liveness', one());
    const byToken = await postVerify(base, p.token, 'rgb_liveness', one());
    const lines = await waitFor(async () => {
      const page = (await admin('GET', `/admin/api/audit?token_id=${p.id}`)).json;
      return page.items.length >= 2 ? page.items : undefined;
    }, { what: 'both audit lines' });
    t.equal(lines.find((l: Json) => l.request_id === bySession.json.request_id).session_id, s.session_id);
    t.notOk('session_id' in lines.find((l: Json) => l.request_id === byToken.json.request_id), 'a business token\'s line is as before');

    const listed = await admin('GET', `/admin/api/tokens/${p.id}/sessions`);
    t.equal(listed.status, 200);
    t.same(listed.json.sessions.map((x: Json) => [x.session_id, x.captures_used, x.state]), [[s.session_id, 1, 'active']], 'the revoked one is not listed');
    t.equal((await admin('GET', '/admin/api/tokens/tok_nope/sessions')).status, 404);

    // the revoked session's device calling on: counted too, with its refusal
    t.equal((await call('GET', '/v1/me', gone.session_token)).status, 401);
    t.equal((await postVerify(base, gone.session_token, 'rgb_liveness', one())).status, 401);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const value = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? NaN);
    t.ok(value(/^lv_sessions_minted_total\{module="rgb_liveness"\} (\d+)/m) >= 2, 'sessions minted');
    t.ok(value(/^lv_session_calls_total\{call="verify",status="200"\} (\d+)/m) >= 1, 'verify calls by session');
    t.ok(value(/^lv_session_calls_total\{call="me",status="200"\} (\d+)/m) >= 1, 'me calls by session');
    t.ok(value(/^lv_session_calls_total\{call="me",status="401"\} (\d+)/m) >= 1, 'me calls by a dead session (only the ones that authenticated were counted)');
    t.ok(value(/^lv_session_calls_total\{call="verify",status="401"\} (\d+)/m) >= 1, 'verify calls by a dead session');
  });
}
