import t from 'tap';
import { base64url, createLocalJWKSet, flattenedVerify } from 'jose';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken, startServer } from '../helpers/server.ts';

const server = await startServer({ ready: true });
t.teardown(() => server.stop());

async function check(body: string, signature: string, jwks: ReturnType<typeof createLocalJWKSet>) {
  const [protectedHeader, , sig] = signature.split('.');
  return flattenedVerify({ protected: protectedHeader!, payload: base64url.encode(body), signature: sig! }, jwks);
}

t.test('verify answers carry a detached EdDSA JWS that checks against the JWKS', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:5:day']);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]), { 'idempotency-key': 'sig-1' });
  t.equal(r.status, 200);
  const signature = r.headers.get('x-verdict-signature');
  t.match(signature, /^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$/, 'detached compact form');
  const jwks = createLocalJWKSet(await (await fetch(`${server.baseUrl}/.well-known/jwks.json`)).json());
  const ok = await check(r.text, signature!, jwks);
  t.equal(ok.protectedHeader?.alg, 'EdDSA');
  const tampered = r.text.replace('"charged_units":1', '"charged_units":0');
  t.not(tampered, r.text);
  await t.rejects(check(tampered, signature!, jwks), 'a tampered body fails');
  const replay = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]), { 'idempotency-key': 'sig-2' });
  t.ok(await check(replay.text, replay.headers.get('x-verdict-signature')!, jwks), 'replays are signed too');
  const denied = await postVerify(server.baseUrl, token, 'color_liveness', request([single()]));
  t.equal(denied.status, 403);
  t.ok(await check(denied.text, denied.headers.get('x-verdict-signature')!, jwks), 'error answers are signed as well');
});
