// Reserve and infer overlapped, through the service's HTTP API and its real engine and LMDB store
// (test/helpers/api.ts: the API worker's app in process, the engine host with its pool): a caller
// whose quota runs out gets the engine's work for at most its first refused call, never in a
// loop (src/verify/early-inference.ts). The engine's runs are seen by their failures: captures
// named fail-* fail in the engine host (TEST_INFERENCE_FAIL_PREFIX), which the relay logs as
// it answers ('inference failed'); a call that never reaches the engine logs nothing.
// A call with an Idempotency-Key is never overlapped (it may be a replay, which runs no
// inference): refused for quota, it has no engine run even from a caller on the list.
// The cases of the overlap itself (replay, refunds, both stores) are in early-inference.test.ts.

import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

const api = await startApi({ engine: 'real', ready: true, env: { TEST_INFERENCE_FAIL_PREFIX: 'fail-' } });
t.teardown(() => api.stop());

const engineFailures = () => api.logLines().filter((l) => l.msg === 'inference failed').length;

t.test('a caller out of quota: the first refused call had the engine run beside its reservation, the next ones none', async (t) => {
  const { token } = await makeToken(api, ['rgb_liveness:1:day']);
  const first = await postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id: 'http-ok-1' })]));
  t.equal(first.status, 200, 'the reservation that puts the caller on the worker\'s list');
  const before = engineFailures();
  for (let i = 2; i <= 6; i++) {
    const r = await postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id: `fail-http-${i}` })]));
    t.equal(r.status, 429, `call ${i}: refused`);
    t.equal(r.json.error.code, 'quota_exceeded');
  }
  // the refusals are answered without waiting for the engine: its failure is logged as it answers
  await waitFor(() => engineFailures() > before, { what: 'the engine run of the first refused call' });
  // a call that does reach the engine, after them on the same channel to the engine: once it is
  // answered, an engine run of any later refused call would have been logged first (without
  // this barrier a run logged a moment after the first went unseen)
  const { token: other } = await makeToken(api, ['rgb_liveness:1:day']);
  const served = await postVerify(api.baseUrl, other, 'rgb_liveness', request([single({ id: 'fail-http-barrier' })]));
  t.equal(served.status, 500);
  t.equal(engineFailures() - before, 2, 'five refused calls, one engine run: the first (overlapped); the others serial, refused before any inference (the second run is the barrier\'s)');
  const me = await (await fetch(`${api.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json();
  t.equal(me.usage[0].used, 1, 'nothing charged for the refusals');
});

t.test('a keyed call of a caller on the list is serial: refused for quota, no engine run', async (t) => {
  const { token } = await makeToken(api, ['rgb_liveness:1:day']);
  const first = await postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id: 'http-key-ok' })]));
  t.equal(first.status, 200, 'a key-less reservation: the caller is on the worker\'s list');
  const before = engineFailures();
  const keyed = await postVerify(api.baseUrl, token, 'rgb_liveness', request([single({ id: 'fail-http-keyed' })]), { 'idempotency-key': 'http-keyed-1' });
  t.equal(keyed.status, 429);
  t.equal(keyed.json.error.code, 'quota_exceeded');
  // a call that does reach the engine, after it on the same channel to the engine (one pool
  // thread): once it is answered, an engine run of the keyed call would have been logged first
  const { token: other } = await makeToken(api, ['rgb_liveness:1:day']);
  const served = await postVerify(api.baseUrl, other, 'rgb_liveness', request([single({ id: 'fail-http-served' })]));
  t.equal(served.status, 500);
  t.equal(served.json.error.code, 'inference_failed');
  t.equal(engineFailures() - before, 1, 'one engine run: the served call\'s; none for the keyed refusal');
});
