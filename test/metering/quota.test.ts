import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { color, postVerify, request, sequence, single } from '../helpers/captures.ts';
import { bearer, makeToken, startServer, tempDir } from '../helpers/server.ts';
import { removeGrant, setGrant } from '../../src/admin/tokens.ts';
import type { Grant } from '../../src/store/index.ts';
import { ledgerVerify, withServerStore } from '../helpers/store.ts';

const dir = tempDir();
const clock = path.join(dir, 'clock');
const setClock = (iso: string) => fs.writeFileSync(clock, iso);
setClock('2026-01-31T23:59:50.000Z');
// TZ: quota windows are UTC days and months. The server runs at UTC+14 (Kiritimati): a window
// computed in local time is then a day off near midnight UTC, which a UTC host cannot show.
const server = await startServer({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock, TZ: 'Pacific/Kiritimati' }, ready: true });
t.teardown(() => server.stop());

// grants are changed in the store, as the CLI's `grant set` does (the CLI command has its tests
// in test/cli/cli-basics and test/auth/business-tokens)
const grant = (id: string, g: Grant) => withServerStore(server, (store) => setGrant(store, id, g));
const usage = async (token: string, module = 'rgb_liveness') =>
  (await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage.find((u: any) => u.module_id === module);

t.test('day window: usage, reset_at and Retry-After across midnight UTC', async (t) => {
  setClock('2026-01-31T23:59:50.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:2:day']);
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single(), single()]))).status, 200, 'batch of 2 within limit');
  const u = await usage(token);
  t.same(u, { module_id: 'rgb_liveness', limit: 2, period: 'day', used: 2, remaining: 0, reset_at: '2026-02-01T00:00:00.000Z' });
  const denied = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]));
  t.equal(denied.status, 429);
  t.equal(denied.json.error.code, 'quota_exceeded');
  t.equal(denied.headers.get('retry-after'), '10', 'seconds to 00:00 UTC');
  setClock('2026-02-01T00:00:00.000Z');
  t.same(await usage(token), { module_id: 'rgb_liveness', limit: 2, period: 'day', used: 0, remaining: 2, reset_at: '2026-02-02T00:00:00.000Z' });
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]))).status, 200, 'new day, new units');
});

t.test('month window resets at 00:00 UTC on the first; never has no reset', async (t) => {
  setClock('2026-02-28T23:59:59.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:1:month', 'color_liveness:1:never']);
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]))).status, 200);
  t.equal((await postVerify(server.baseUrl, token, 'color_liveness', request([color()]))).status, 200);
  const m = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]));
  t.equal(m.status, 429);
  t.equal(m.headers.get('retry-after'), '1');
  const n = await postVerify(server.baseUrl, token, 'color_liveness', request([color()]));
  t.equal(n.status, 429);
  t.equal(n.headers.get('retry-after'), null, 'never quotas do not recover: no Retry-After');
  t.equal((await usage(token, 'color_liveness')).reset_at, null);
  setClock('2026-03-01T00:00:00.000Z');
  t.same(await usage(token), { module_id: 'rgb_liveness', limit: 1, period: 'month', used: 0, remaining: 1, reset_at: '2026-04-01T00:00:00.000Z' });
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]))).status, 200);
  t.equal((await postVerify(server.baseUrl, token, 'color_liveness', request([color()]))).status, 429, 'never stays used up');
});

t.test('a batch is reserved whole or rejected whole', async (t) => {
  setClock('2026-03-10T12:00:00.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:3:day']);
  const four = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single(), single(), single(), sequence(3)]));
  t.equal(four.status, 429);
  t.equal(four.headers.get('retry-after'), String(12 * 3600), 'day quota: Retry-After to midnight, as the spec says');
  t.match(four.json.error.message, /more than the whole quota of 3, so split the batch/, 'the message says waiting will not help');
  t.equal((await usage(token)).used, 0, 'nothing reserved');
  const three = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single(), sequence(3), single()]));
  t.equal(three.status, 200);
  t.equal(three.json.charged_units, 3);
  t.equal(three.json.results.length, 3);
  t.equal((await usage(token)).used, 3);
});

t.test('limit null is unlimited but recorded; limit 0 authorises nothing', async (t) => {
  setClock('2026-03-10T12:00:00.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:unlimited:day', 'color_liveness:0:day']);
  for (let i = 0; i < 3; i++) t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]))).status, 200);
  t.same(await usage(token), { module_id: 'rgb_liveness', limit: null, period: 'day', used: 3, remaining: null, reset_at: '2026-03-11T00:00:00.000Z' });
  const zero = await postVerify(server.baseUrl, token, 'color_liveness', request([color()]));
  t.equal(zero.status, 429);
  t.equal(zero.json.error.code, 'quota_exceeded');
});

t.test('changing a limit or re-granting keeps the period usage', async (t) => {
  setClock('2026-03-10T12:00:00.000Z');
  const { id, token } = await makeToken(server, ['rgb_liveness:5:day']);
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single(), single()]))).status, 200);
  t.ok(await grant(id, { module_id: 'rgb_liveness', limit: 3, period: 'day' }));
  t.match(await usage(token), { used: 2, remaining: 1 });
  t.ok(await withServerStore(server, (store) => removeGrant(store, id, 'rgb_liveness')));
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]))).status, 403, 'ungranted');
  t.ok(await grant(id, { module_id: 'rgb_liveness', limit: 3, period: 'day' }));
  t.match(await usage(token), { used: 2, remaining: 1 }, 're-grant keeps the usage');
  t.ok(await grant(id, { module_id: 'rgb_liveness', limit: 10, period: 'month' }));
  t.match(await usage(token), { used: 2, period: 'month' }, 'a changed period sees the usage of its window');
});

t.test('live, non-live and retry results all charge; the response carries the usage snapshot', async (t) => {
  setClock('2026-03-10T12:00:00.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:10:day', 'color_liveness:10:day']);
  const incomplete = color({ phases: 2 });
  const r = await postVerify(server.baseUrl, token, 'color_liveness', request([incomplete]));
  t.equal(r.status, 200);
  t.equal(r.json.results[0].status, 'retry');
  t.equal(r.json.results[0].reason, 'incomplete_capture');
  t.equal(r.json.charged_units, 1);
  t.same(r.json.usage.map((u: any) => [u.module_id, u.used]), [['color_liveness', 1], ['rgb_liveness', 0]]);
  const s = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]));
  t.same(s.json.usage.map((u: any) => [u.module_id, u.used]), [['color_liveness', 1], ['rgb_liveness', 1]], 'usage as of settlement');
});

t.test('calls without a key are independent and each is charged', async (t) => {
  setClock('2026-03-10T12:00:00.000Z');
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'same-capture' })]);
  const a = await postVerify(server.baseUrl, token, 'rgb_liveness', body);
  const b = await postVerify(server.baseUrl, token, 'rgb_liveness', body);
  t.equal(a.status, 200);
  t.equal(b.status, 200);
  t.not(a.json.request_id, b.json.request_id);
  t.equal((await usage(token)).used, 2);
});

t.test('ledger verify agrees with the counters', async (t) => {
  const r = await ledgerVerify(server);
  t.equal(r.code, 0, r.stdout);
  t.equal(r.json.ok, true);
  t.ok(r.json.entries > 10);
});
