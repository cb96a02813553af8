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
