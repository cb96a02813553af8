import t from 'tap';
import { postVerify, request, single, color } from '../helpers/captures.ts';
import { makeToken, startServer } from '../helpers/server.ts';

const server = await startServer({ ready: true });
t.teardown(() => server.stop());

t.test('checks run in the contract order: token, module, grant, enabled', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:5:day']);
  const body = request([single()]);
  const code = async (tok: string, module: string, headers: Record<string, string> = {}) => {
    const r = await postVerify(server.baseUrl, tok, module, body, headers);
    return [r.status, r.json?.error?.code ?? r.json?.detail?.[0]?.type];
  };
  t.same(await code('lvk_' + 'z'.repeat(43), 'nope'), [401, 'invalid_token'], 'token before module');
  t.same(await code(token, 'face_liveness'), [404, 'module_not_found']);
  t.same(await code(token, 'color_liveness'), [403, 'module_forbidden']);
  t.equal((await server.cli(['module', 'disable', 'rgb_liveness'])).code, 0);
  t.same(await code(token, 'rgb_liveness'), [403, 'module_disabled']);
  t.same(await code(token, 'rgb_liveness', { 'idempotency-key': 'has space' }), [403, 'module_disabled'], 'module_disabled before header checks');
  t.equal((await server.cli(['module', 'enable', 'rgb_liveness'])).code, 0);
  t.same(await code(token, 'rgb_liveness', { 'idempotency-key': 'has space' }), [400, 'invalid_idempotency_key']);
  const { token: colorOnly } = await makeToken(server, ['color_liveness:5:day']);
  t.same(await code(colorOnly, 'rgb_liveness'), [403, 'module_forbidden']);
  const mixed = await postVerify(server.baseUrl, colorOnly, 'color_liveness', request([color(), single()]));
  t.equal(mixed.status, 422, 'RGB and colour never share a request');
});

t.test('a session cookie is not a business token', async (t) => {
  const r = await fetch(`${server.baseUrl}/v1/me`, { headers: { cookie: 'lv_session=abc' } });
  t.equal(r.status, 401);
  t.equal((await r.json()).error.code, 'invalid_token');
});
