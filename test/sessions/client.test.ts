import { createRemoteJWKSet, flattenedVerify } from 'jose';
import t from 'tap';
import { createSession, createVerifyClient, getSession, revokeSession } from '../../src/client/index.ts';
import { request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';

// The client package's side of device sessions (issue 26), against the real service: the
// backend mints and reads with its business token, the device verifies with the session token.
// The service's app and engine in process (test/helpers/api.ts; was one server start).
t.setTimeout(300_000);
const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());
const { token } = await makeToken(server, ['rgb_liveness:100:day']);
const backend = { baseUrl: server.baseUrl, token };

t.test('mint, verify on the device, read the results, revoke', async (t) => {
  const minted = await createSession(backend, { module_id: 'rgb_liveness', max_captures: 2 });
  if (minted.kind !== 'ok') throw new Error(`createSession: ${minted.code}`);
  t.match(minted.value, { session_id: /^ses_/, session_token: /^lvs_/, module_id: 'rgb_liveness', max_captures: 2 });

  const device = createVerifyClient({ baseUrl: server.baseUrl, token: minted.value.session_token, maxAttempts: 1 });
  const { metadata, files } = request([single({ id: 'dev-1', seed: 7 })]);
  const verdict = await device.verify('rgb_liveness', metadata as never, files);
  if (verdict.kind !== 'completed') throw new Error(`verify: ${verdict.code}`);
  const me = await device.session();
  t.match(me, { kind: 'ok', value: { session: { session_id: minted.value.session_id, captures_used: 1, captures_left: 1 } } });

  const read = await getSession(backend, minted.value.session_id);
  if (read.kind !== 'ok') throw new Error(`getSession: ${read.code}`);
  t.match(read.value, { state: 'active', captures_used: 1 });
  t.same(read.value.results, [{ request_id: verdict.response.request_id, status: 'completed', charged_units: 1, results: verdict.response.results }]);

  const pair = request([single({ id: 'dev-2' }), single({ id: 'dev-3', seed: 2 })]);
  const over = await device.verify('rgb_liveness', pair.metadata as never, pair.files);
  t.match(over, { kind: 'error', httpStatus: 429, code: 'session_captures_exceeded', retryable: false });

  t.match(await getSession({ ...backend, token: minted.value.session_token }, minted.value.session_id), { kind: 'error', httpStatus: 403, code: 'session_not_allowed' }, 'the device cannot read it');
  t.match(await revokeSession(backend, minted.value.session_id), { kind: 'ok', value: null });
  t.match(await device.verify('rgb_liveness', metadata as never, files), { kind: 'error', httpStatus: 401, code: 'invalid_session_token', retryable: false });
  t.match(await getSession(backend, minted.value.session_id), { kind: 'ok', value: { state: 'revoked' } });
  t.match(await createSession(backend, { module_id: 'color_liveness' }), { kind: 'error', httpStatus: 403, code: 'module_forbidden' });
});

t.test('the device forwards the answer it got, body and signature: the backend checks them with jose against the JWKS', async (t) => {
  const minted = await createSession(backend, { module_id: 'rgb_liveness', max_captures: 2 });
  if (minted.kind !== 'ok') throw new Error(`createSession: ${minted.code}`);
  const device = createVerifyClient({ baseUrl: server.baseUrl, token: minted.value.session_token, maxAttempts: 1 });
  const { metadata, files } = request([single({ id: 'fwd-1', seed: 3 })]);
  const key = 'forwarded-1';
  const outcome = await device.verify('rgb_liveness', metadata as never, files, { idempotencyKey: key });
  if (outcome.kind !== 'completed') throw new Error(`verify: ${outcome.code}`);
  t.type(outcome.body, 'string', 'the outcome keeps the body as it came');
  t.type(outcome.signature, 'string', 'and the X-Verdict-Signature header');
  t.same(JSON.parse(outcome.body), outcome.response, 'the text is the answer the outcome read');

  // the backend: what it received from the device, as JSON (a string field and a header value)
  const forwarded = JSON.parse(JSON.stringify({ body: outcome.body, signature: outcome.signature })) as { body: string; signature: string };
  const jwks = createRemoteJWKSet(new URL(`${server.baseUrl}/.well-known/jwks.json`));
  const check = async (body: string, signature: string) => {
    const [protectedHeader, empty, sig] = signature.split('.');
    if (!protectedHeader || empty !== '' || !sig) throw new Error('not a detached JWS');
    await flattenedVerify({ protected: protectedHeader, payload: Buffer.from(new TextEncoder().encode(body)).toString('base64url'), signature: sig }, jwks, { algorithms: ['EdDSA'] });
    return JSON.parse(body) as { request_id: string; results: { alive: boolean }[] };
  };
  const answer = await check(forwarded.body, forwarded.signature);
  t.equal(answer.request_id, outcome.response.request_id, 'the forwarded bytes verify against the served JWKS');
  const read = await getSession(backend, minted.value.session_id);
  if (read.kind !== 'ok') throw new Error(`getSession: ${read.code}`);
  t.ok(read.value.results.some((r) => r.request_id === answer.request_id), 'and bind to a call of the session the backend minted');

  const flipped = forwarded.body.replace(/"alive":(true|false)/, (_m, v: string) => `"alive":${v === 'true' ? 'false' : 'true'}`);
  t.not(flipped, forwarded.body);
  await t.rejects(check(flipped, forwarded.signature), 'a body the device changed does not verify');

  // the replay of the same key: the saved answer, byte for byte, signed too
  const replay = await device.verify('rgb_liveness', metadata as never, files, { idempotencyKey: key });
  if (replay.kind !== 'completed') throw new Error(`replay: ${replay.code}`);
  t.equal(replay.replayed, true);
  t.equal(replay.body, outcome.body, 'a replay gives the same bytes');
  t.equal((await check(replay.body, replay.signature!)).request_id, answer.request_id, 'and they verify');
});
