import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { patchToken, revokeToken } from '../../src/admin/tokens.ts';
import { withServerStore } from '../../bench/harness/store.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken, tempDir } from '../helpers/server.ts';

const dir = tempDir();
const clock = path.join(dir, 'clock');
fs.writeFileSync(clock, '2026-03-31T23:59:58.000Z');
// the service's app in process on its real store (no models): test/helpers/api.ts (was one server start)
const server = await startApi({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock } });
t.teardown(() => server.stop());

// State a test only needs in place (not the CLI command that makes it, which has tests of its
// own: test/cli/cli-basics.test.ts, the module tests) is written in-process, as makeToken
// does: each CLI run costs a TypeScript start-up, seconds on a loaded 2-core host.
const inStore = <T>(fn: Parameters<typeof withServerStore<T>>[1]) => withServerStore(server, fn);

const me = (token: string | undefined, extra: Record<string, string> = {}) =>
  fetch(`${server.baseUrl}/v1/me`, { headers: { ...(token === undefined ? {} : { authorization: token }), ...extra } });

t.test('a CLI-made token reads its usage on /v1/me', async (t) => {
  const { id, token, name } = await makeToken(server, ['rgb_liveness:100:day', 'color_liveness:unlimited:never']);
  t.match(token, /^lvk_[A-Za-z0-9_-]{43}$/);
  const r = await me(`Bearer ${token}`);
  t.equal(r.status, 200);
  const body = await r.json();
  t.same(body.token, { id, name, expires_at: null, demo: false });
  t.same(body.usage, [
    { module_id: 'color_liveness', limit: null, period: 'never', used: 0, remaining: null, reset_at: null },
    { module_id: 'rgb_liveness', limit: 100, period: 'day', used: 0, remaining: 100, reset_at: '2026-04-01T00:00:00.000Z' },
  ]);
});

t.test('month period resets at 00:00 UTC on the first', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:0:month']);
  const body = await (await me(`Bearer ${token}`)).json();
  t.same(body.usage, [{ module_id: 'rgb_liveness', limit: 0, period: 'month', used: 0, remaining: 0, reset_at: '2026-04-01T00:00:00.000Z' }]);
});

t.test('/v1/modules lists granted modules with their status', async (t) => {
  const { token } = await makeToken(server, ['color_liveness:5:day']);
  const r = await fetch(`${server.baseUrl}/v1/modules`, { headers: bearer(token) });
  t.equal(r.status, 200);
  const body = await r.json();
  t.equal(body.modules.length, 1);
  t.equal(body.modules[0].module_id, 'color_liveness');
  t.equal(body.modules[0].status, 'unavailable', 'no engine in this test\'s service: no module is ready');
  await inStore((store) => store.setModuleEnabled('color_liveness', false));
  const after = await (await fetch(`${server.baseUrl}/v1/modules`, { headers: bearer(token) })).json();
  t.same(after.modules, [{ module_id: 'color_liveness', status: 'disabled' }]);
  await inStore((store) => store.setModuleEnabled('color_liveness', true));
});

t.test('every bad token is 401 invalid_token', async (t) => {
  const good = await makeToken(server, ['rgb_liveness:5:day']);
  const cases: [string, string | undefined][] = [
    ['missing', undefined],
    ['empty bearer', 'Bearer '],
    ['wrong scheme', `Basic ${good.token}`],
    ['malformed', 'Bearer lvk_short'],
    ['wrong prefix', `Bearer xyz_${good.token.slice(4)}`],
    ['unknown', `Bearer lvk_${'B'.repeat(43)}`],
    ['one char off', `Bearer ${good.token.slice(0, -1)}${good.token.endsWith('A') ? 'B' : 'A'}`],
  ];
  for (const [name, header] of cases) {
    const r = await me(header);
    t.equal(r.status, 401, name);
    t.equal(r.headers.get('www-authenticate'), 'Bearer realm="liveness"', `${name}: the 401 names the scheme (RFC 9110)`);
    t.equal((await r.json()).error.code, 'invalid_token', name);
  }
  t.equal((await me(`Bearer ${good.token}`)).status, 200, 'the good one works');
  // verify builds its own answers (src/verify/outcomes.ts): the same challenge there
  const { postVerify, request, single } = await import('../helpers/captures.ts');
  const refused = await postVerify(server.baseUrl, `lvk_${'B'.repeat(43)}`, 'rgb_liveness', request([single()]));
  t.equal(refused.status, 401);
  t.equal(refused.headers.get('www-authenticate'), 'Bearer realm="liveness"', 'verify\'s 401 names the scheme too');
  const deadSession = await me(`Bearer lvs_${'C'.repeat(43)}`);
  t.equal(deadSession.status, 401);
  t.equal(deadSession.headers.get('www-authenticate'), 'Bearer realm="liveness"', 'so does a session token\'s');
  const admin = await fetch(`${server.baseUrl}/admin/api/tokens`);
  t.equal(admin.status, 401);
  t.equal(admin.headers.get('www-authenticate'), null, 'the console\'s cookie session names no scheme');
});

t.test('disabled, expired and revoked tokens are refused, and enable works', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:5:day']);
  await inStore((store) => patchToken(store, a.id, { enabled: false }));
  t.equal((await me(`Bearer ${a.token}`)).status, 401, 'disabled');

  const b = await makeToken(server, ['rgb_liveness:5:day'], ['--expires', '2026-03-31T23:59:59.000Z']);
  t.equal((await me(`Bearer ${b.token}`)).status, 200, 'before expiry');
  fs.writeFileSync(clock, '2026-03-31T23:59:59.000Z');
  t.equal((await me(`Bearer ${b.token}`)).status, 401, 'at expiry');
  fs.writeFileSync(clock, '2026-03-31T23:59:58.000Z');

  const c = await makeToken(server, ['rgb_liveness:5:day']);
  t.equal((await me(`Bearer ${c.token}`)).status, 200, 'before the CLI expires it');

  const d = await makeToken(server, ['rgb_liveness:5:day']);
  await inStore((store) => revokeToken(store, d.id));
  t.equal((await me(`Bearer ${d.token}`)).status, 401, 'revoked');

  // the CLI commands under test, on three tokens, side by side (one start-up's time)
  const [enable, expire, enableRevoked] = await Promise.all([
    server.cli(['token', 'enable', a.id]),
    server.cli(['token', 'expire', c.id]),
    server.cli(['token', 'enable', d.id]),
  ]);
  t.equal(enable.code, 0, enable.stderr);
  t.equal((await me(`Bearer ${a.token}`)).status, 200, 're-enabled');
  t.equal(expire.code, 0, expire.stderr);
  t.equal((await me(`Bearer ${c.token}`)).status, 401, 'expired by CLI');
  t.equal(enableRevoked.code, 4, 'enabling a revoked token is refused (conflict)');
  t.match(enableRevoked.stderr, /revoked for good/);
  t.equal((await me(`Bearer ${d.token}`)).status, 401, 'revocation is final');
});

t.test('the store keeps only hashes and token lists never show plaintext', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:5:day']);
  const list = await server.cli(['token', 'list']);
  t.notOk(list.stdout.includes(a.token), 'list has no plaintext');
  t.notOk(list.stdout.includes('"hash"'), 'list has no hash');
  const files = fs.readdirSync(path.join(server.dataDir, 'store'));
  for (const f of files) t.notOk(fs.readFileSync(path.join(server.dataDir, 'store', f)).includes(Buffer.from(a.token)), `${f} has no plaintext`);
});

t.test('grants: set, change and remove through the CLI', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:5:day']);
  // side by side: the refused ones write nothing (their arguments are refused before the
  // store is touched), and each change is one store transaction on the token, so the two
  // grants set at once must both land
  const [color, rgb, bad, badPeriod] = await Promise.all([
    server.cli(['grant', 'set', a.id, 'color_liveness', 'unlimited', 'month']),
    server.cli(['grant', 'set', a.id, 'rgb_liveness', '7', 'never']),
    server.cli(['grant', 'set', a.id, 'face_liveness', '1', 'day']),
    server.cli(['grant', 'set', a.id, 'rgb_liveness', '1', 'week']),
  ]);
  t.equal(color.code, 0, color.stderr);
  t.equal(rgb.code, 0, rgb.stderr);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /module must be one of/);
  t.match(badPeriod.stderr, /period must be/);
  let body = await (await me(`Bearer ${a.token}`)).json();
  t.same(body.usage.map((u: any) => [u.module_id, u.limit, u.period]), [['color_liveness', null, 'month'], ['rgb_liveness', 7, 'never']]);
  t.equal((await server.cli(['grant', 'remove', a.id, 'rgb_liveness'])).code, 0);
  body = await (await me(`Bearer ${a.token}`)).json();
  t.same(body.usage.map((u: any) => u.module_id), ['color_liveness']);
});
