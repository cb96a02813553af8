// Every verify answer carries a detached EdDSA JWS of its exact body bytes (X-Verdict-Signature)
// that checks against the service's JWKS: a verdict, a replay and a refusal alike. In process,
// on a real LMDB store, with the service's own signer over a DATA_DIR (src/signing) and the
// JWKS as the service publishes it from that folder.
// Replaces the spawned test/verify/signed-verdict.test.ts of the same name (one server start):
// that the server serves this JWKS at /.well-known/jwks.json, and signs with its key, is
// test/signing/verdict-signature.test.ts's; that a served verdict's X-Verdict-Signature
// checks against the served JWKS, test/signing/revocation{,-pg}.test.ts's (helpers/verdicts.ts);
// that the header is exposed through CORS, test/http/cors.test.ts's.

import t from 'tap';
import { base64url, createLocalJWKSet, flattenedVerify, type JSONWebKeySet } from 'jose';
import { publicJwks, signBody, signerFor } from '../../src/signing/index.ts';
import { request, single } from '../helpers/captures.ts';
import { tempDir } from '../helpers/server.ts';
import { addToken, call, codeOf, lmdbStore, world } from './world.ts';

const { store } = lmdbStore(t);
const dataDir = tempDir();

async function check(body: string, signature: string, jwks: ReturnType<typeof createLocalJWKSet>) {
  const [protectedHeader, , sig] = signature.split('.');
  return flattenedVerify({ protected: protectedHeader!, payload: base64url.encode(body), signature: sig! }, jwks);
}

t.test('verify answers carry a detached EdDSA JWS that checks against the JWKS', async (t) => {
  const w = world(store);
  w.deps.sign = (body) => signBody(signerFor(dataDir), body);
  const { plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 5, period: 'day' }]);
  const first = request([single({ id: 'signed-1' })]);
  const r = await call(w, plaintext, first, { idempotencyKey: 'sig-1' });
  t.equal(r.status, 200);
  const signature = r.headers?.['X-Verdict-Signature'];
  t.match(signature, /^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+$/, 'detached compact form');
  const jwks = createLocalJWKSet(publicJwks(dataDir) as JSONWebKeySet);
  const body = r.body as string;
  const ok = await check(body, signature!, jwks);
  t.equal(ok.protectedHeader?.alg, 'EdDSA');
  const tampered = body.replace('"charged_units":1', '"charged_units":0');
  t.not(tampered, body);
  await t.rejects(check(tampered, signature!, jwks), 'a tampered body fails');
  const fresh = await call(w, plaintext, request([single()]), { idempotencyKey: 'sig-2' });
  const again = await check(fresh.body as string, fresh.headers!['X-Verdict-Signature']!, jwks);
  t.ok(ok.protectedHeader?.kid, 'the signature names its key');
  t.equal(again.protectedHeader?.kid, ok.protectedHeader?.kid, 'every answer is signed with the same key');
  const replay = await call(w, plaintext, first, { idempotencyKey: 'sig-1' });
  t.equal(codeOf(replay, 'reserve'), 'replayed');
  t.ok(await check(replay.body as string, replay.headers!['X-Verdict-Signature']!, jwks), 'replays are signed too');
  const denied = await call(w, plaintext, request([single()]), { module: 'color_liveness' });
  t.equal(denied.status, 403);
  t.ok(await check(denied.body as string, denied.headers!['X-Verdict-Signature']!, jwks), 'error answers are signed as well');
});
