import t from 'tap';
import { buildCapture, buildVerifyBody } from '../../src/client/index.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';
import { settledState, waitFor } from '../helpers/wait.ts';
import { ledgerVerify } from '../helpers/store.ts';

const server = await startServer({
  ready: true,
  env: {
    TEST_INFERENCE_DELAY_MS: '2500',
    TEST_INFERENCE_DELAY_PREFIX: 'slow-',
    TEST_INFERENCE_FAIL_PREFIX: 'fail-',
    TEST_SETTLEMENT_FAIL_PREFIX: 'settle-',
  },
});
t.teardown(() => server.stop());

const used = async (token: string) => (await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used;

/** The same logical packet serialised with other key order and whitespace. */
function reordered(built: ReturnType<typeof buildCapture>) {
  const m = built.metadata;
  const text = JSON.stringify({ frames: m.frames.map((f) => Object.fromEntries(Object.entries(f).reverse())), complete: m.complete, preprocess_profile: m.preprocess_profile, capture_profile: m.capture_profile, mode: m.mode, capture_id: m.capture_id, protocol_version: 1 }, null, 3);
  return buildVerifyBody(text, built.files);
}

t.test('completed key replays the saved answer byte for byte, no new charge', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const built = buildCapture(single({ id: 'replay-1' }));
  const first = await postVerify(server.baseUrl, token, 'rgb_liveness', buildVerifyBody(built.metadata, built.files), { 'idempotency-key': 'key-replay-1' });
  t.equal(first.status, 200);
  t.equal(first.headers.get('idempotency-replayed'), null);
  const again = await postVerify(server.baseUrl, token, 'rgb_liveness', reordered(built), { 'idempotency-key': 'key-replay-1' });
  t.equal(again.status, 200);
  t.equal(again.headers.get('idempotency-replayed'), 'true');
  t.equal(again.text, first.text, 'byte for byte, original request_id and usage snapshot included');
  t.not(again.headers.get('x-request-id'), first.headers.get('x-request-id'), 'the replay has its own X-Request-ID');
  t.equal(await used(token), 1, 'charged once');
});

t.test('same key with different input is a conflict and changes nothing', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const a = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'c-1' })]), { 'idempotency-key': 'k-conflict' });
  t.equal(a.status, 200);
  const b = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'c-1', seed: 99 })]), { 'idempotency-key': 'k-conflict' });
  t.equal(b.status, 409);
  t.equal(b.json.error.code, 'idempotency_conflict');
  const c = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'c-2' })]), { 'idempotency-key': 'k-conflict' });
  t.equal(c.json.error.code, 'idempotency_conflict', 'another capture id is another input');
  t.equal(await used(token), 1);
  const again = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'c-1' })]), { 'idempotency-key': 'k-conflict' });
  t.equal(again.headers.get('idempotency-replayed'), 'true', 'the original still replays');
});

t.test('keys are per token', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:10:day']);
  const b = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'shared' })]);
  t.equal((await postVerify(server.baseUrl, a.token, 'rgb_liveness', body, { 'idempotency-key': 'shared-key' })).status, 200);
  const r = await postVerify(server.baseUrl, b.token, 'rgb_liveness', body, { 'idempotency-key': 'shared-key' });
  t.equal(r.status, 200);
  t.equal(r.headers.get('idempotency-replayed'), null);
  t.equal(await used(b.token), 1);
});

t.test('a pending key answers 409 request_in_progress with Retry-After', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'slow-1' })]);
  const first = postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-slow' });
  const firstDone = settledState(first);
  // the key is pending from the moment its units are reserved (the same write binds the key)
  await waitFor(async () => (await used(token)) === 1, { what: 'the first call to reserve its unit' });
  t.notOk(firstDone.settled, 'the first call is still running');
  const second = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-slow' });
  t.equal(second.status, 409);
  t.equal(second.json.error.code, 'request_in_progress');
  t.ok(Number(second.headers.get('retry-after')) >= 1);
  // the fingerprint is checked before the pending state: other bytes on a pending key are a
  // conflict (the client's mistake), not a call to poll
  const other = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'slow-1', seed: 7 })]), { 'idempotency-key': 'k-slow' });
  t.equal(other.status, 409);
  t.equal(other.json.error.code, 'idempotency_conflict', 'a different body on a pending key is a conflict');
  t.equal(other.headers.get('retry-after'), null, 'no invitation to retry the conflicting body');
  t.notOk(firstDone.settled, 'the first call was still running when both answers came');
  const done = await first;
  t.equal(done.status, 200);
  const third = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-slow' });
  t.equal(third.headers.get('idempotency-replayed'), 'true');
  t.equal(third.text, done.text);
  t.equal(await used(token), 1);
});

t.test('a rejected request does not bind its key', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:1:day']);
  const bad = buildCapture(single({ id: 'bad-1' }));
  (bad.metadata as any).protocol_version = 2;
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', buildVerifyBody(bad.metadata, bad.files), { 'idempotency-key': 'k-free' })).status, 422);
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'q1' }), single({ id: 'q2' })]), { 'idempotency-key': 'k-free' })).status, 429, 'quota rejection');
  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'good-1' })]), { 'idempotency-key': 'k-free' });
  t.equal(ok.status, 200, 'the key is still free after a 422 and a 429');
});

t.test('inference failure refunds and releases the key', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'fail-1' })]);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-fail' });
  t.equal(r.status, 500);
  t.equal(r.json.error.code, 'inference_failed');
  t.equal(await used(token), 0, 'refunded');
  const retry = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-fail' });
  t.equal(retry.json.error.code, 'inference_failed', 'the same key may be retried (not 409)');
  const db = lmdbOpen(server.dataDir);
  const entries = [...db.ledger.getRange({})].map((e) => e.value).filter((e: any) => e.token_id === id && e.request_id === r.json.request_id);
  t.same(entries.map((e: any) => [e.kind, e.units]), [['charge', 1], ['refund', 1]], 'ledger shows the hold and its refund');
  await db.close();
});

t.test('settlement failure keeps the reservation for the operator; charge completes the key', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'settle-1' })]);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-settle' });
  t.equal(r.status, 500);
  t.equal(r.json.error.code, 'settlement_failed');
  t.equal(await used(token), 1, 'units stay reserved');
  const again = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-settle' });
  // the key stays held, but nothing is running: a 409 request_in_progress would have the
  // client poll for ever, so the retry hears settlement_failed (contact the operator)
  t.equal(again.status, 500, 'the key stays held');
  t.equal(again.json.error.code, 'settlement_failed');
  t.equal(again.headers.get('retry-after'), null, 'no invitation to poll');
  t.equal(await used(token), 1, 'the retry charged nothing more');
  const list = await server.cli(['settlements', 'list']);
  const mine = list.json.settlements.find((s: any) => s.token_id === id);
  t.ok(mine, 'listed for the operator');
  t.match(mine, { state: 'settlement_failed', units: 1, idempotency_key: 'k-settle', has_saved_answer: true });
  const resolved = await server.cli(['settlements', 'resolve', mine.id, 'charge']);
  t.equal(resolved.code, 0, resolved.stderr);
  t.equal(resolved.json.state, 'charged');
  const replay = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-settle' });
  t.equal(replay.status, 200);
  t.equal(replay.headers.get('idempotency-replayed'), 'true');
  t.equal(replay.json.results[0].capture_id, 'settle-1');
  t.equal(await used(token), 1);
  const twice = await server.cli(['settlements', 'resolve', mine.id, 'refund']);
  t.equal(twice.code, 4, 'a resolved settlement cannot be resolved again (conflict)');
});

t.test('settlement failure resolved by refund gives the units back and frees the key', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:10:day']);
  const body = request([single({ id: 'settle-2' })]);
  t.equal((await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-settle-2' })).status, 500);
  const mine = (await server.cli(['settlements', 'list'])).json.settlements.find((s: any) => s.token_id === id);
  const resolved = await server.cli(['settlements', 'resolve', mine.id, 'refund']);
  t.equal(resolved.json.state, 'refunded');
  t.equal(await used(token), 0);
  const retry = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-settle-2' });
  // a key still held also answers settlement_failed (see the test above): what tells a fresh
  // run from a held key is the second charge, a new reservation with its own request id
  t.equal(retry.json.error.code, 'settlement_failed');
  t.equal(await used(token), 1, 'key released: the retry ran again and holds a unit of its own');
  const mineNow = (await server.cli(['settlements', 'list'])).json.settlements.filter((s: any) => s.token_id === id);
  t.equal(mineNow.length, 1, 'one open settlement for the token: the retry\'s (the refunded one is resolved)');
  t.not(mineNow[0].id, mine.id, 'a new reservation, not the refunded one');
});

t.test('ledger verify after all of the above', async (t) => {
  const r = await ledgerVerify(server);
  t.equal(r.code, 0, r.stdout);
  t.same(r.json.mismatches, []);
});
