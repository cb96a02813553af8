import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { bearer, makeToken, startServer, tempDir } from '../helpers/server.ts';

const dir = tempDir();
const clock = path.join(dir, 'clock');
fs.writeFileSync(clock, '2026-03-31T23:59:58.000Z');
const server = await startServer({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock } });
t.teardown(() => server.stop());

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
  t.ok(['available', 'unavailable'].includes(body.modules[0].status));
  t.equal((await server.cli(['module', 'disable', 'color_liveness'])).code, 0);
  const after = await (await fetch(`${server.baseUrl}/v1/modules`, { headers: bearer(token) })).json();
  t.same(after.modules, [{ module_id: 'color_liveness', status: 'disabled' }]);
  t.equal((await server.cli(['module', 'enable', 'color_liveness'])).code, 0);
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
    t.equal((await r.json()).error.code, 'invalid_token', name);
  }
  t.equal((await me(`Bearer ${good.token}`)).status, 200, 'the good one works');
});

t.test('disabled, expired and revoked tokens are refused, and enable works', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:5:day']);
  t.equal((await server.cli(['token', 'disable', a.id])).code, 0);
  t.equal((await me(`Bearer ${a.token}`)).status, 401, 'disabled');
  t.equal((await server.cli(['token', 'enable', a.id])).code, 0);
  t.equal((await me(`Bearer ${a.token}`)).status, 200, 're-enabled');

  const b = await makeToken(server, ['rgb_liveness:5:day'], ['--expires', '2026-03-31T23:59:59.000Z']);
  t.equal((await me(`Bearer ${b.token}`)).status, 200, 'before expiry');
  fs.writeFileSync(clock, '2026-03-31T23:59:59.000Z');
  t.equal((await me(`Bearer ${b.token}`)).status, 401, 'at expiry');
  fs.writeFileSync(clock, '2026-03-31T23:59:58.000Z');

  const c = await makeToken(server, ['rgb_liveness:5:day']);
  t.equal((await server.cli(['token', 'expire', c.id])).code, 0);
  t.equal((await me(`Bearer ${c.token}`)).status, 401, 'expired by CLI');

  const d = await makeToken(server, ['rgb_liveness:5:day']);
  t.equal((await server.cli(['token', 'revoke', d.id])).code, 0);
  t.equal((await me(`Bearer ${d.token}`)).status, 401, 'revoked');
  const enable = await server.cli(['token', 'enable', d.id]);
  t.equal(enable.code, 4, 'enabling a revoked token is refused (conflict)');
  t.match(enable.stderr, /revoked for good/);
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
  t.equal((await server.cli(['grant', 'set', a.id, 'color_liveness', 'unlimited', 'month'])).code, 0);
  t.equal((await server.cli(['grant', 'set', a.id, 'rgb_liveness', '7', 'never'])).code, 0);
  let body = await (await me(`Bearer ${a.token}`)).json();
  t.same(body.usage.map((u: any) => [u.module_id, u.limit, u.period]), [['color_liveness', null, 'month'], ['rgb_liveness', 7, 'never']]);
  t.equal((await server.cli(['grant', 'remove', a.id, 'rgb_liveness'])).code, 0);
  body = await (await me(`Bearer ${a.token}`)).json();
  t.same(body.usage.map((u: any) => u.module_id), ['color_liveness']);
  const bad = await server.cli(['grant', 'set', a.id, 'face_liveness', '1', 'day']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /module must be one of/);
  const badPeriod = await server.cli(['grant', 'set', a.id, 'rgb_liveness', '1', 'week']);
  t.match(badPeriod.stderr, /period must be/);
});
