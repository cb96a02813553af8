import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';

// A hung inference must not hold a reservation and its key until the next restart.
const server = await startServer({
  ready: true,
  env: { INFERENCE_TIMEOUT_SECONDS: '1', TEST_INFERENCE_DELAY_MS: '3000', TEST_INFERENCE_DELAY_PREFIX: 'hung-' },
});
t.teardown(() => server.stop());

const used = async (token: string) => (await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used;

t.test('no result within INFERENCE_TIMEOUT_SECONDS: 500 inference_failed, refunded, key released', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:5:day']);
  const body = request([single({ id: 'hung-1' })]);
  const started = Date.now();
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-hung' });
  const took = Date.now() - started;
  t.equal(r.status, 500, r.text);
  t.equal(r.json.error.code, 'inference_failed');
  t.ok(took < 2900, `answered at the timeout, before the late result (${took} ms)`);
  t.equal(await used(token), 0, 'the units came back');

  const again = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-hung' });
  t.not(again.status, 409, 'the key was released: the same key runs again');
  const fast = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'fast-1' })]));
  t.equal(fast.status, 200, 'the slots came back');

  await new Promise((r) => setTimeout(r, 3500)); // the late results arrive and are dropped
  t.equal(await used(token), 1, 'only the call that got a verdict is charged');
  const db = lmdbOpen(server.dataDir);
  const kinds = [...db.ledger.getRange({})].map((e) => e.value as any).filter((e) => e.token_id === id).map((e) => e.kind);
  await db.close();
  t.same(kinds.sort(), ['charge', 'charge', 'charge', 'refund', 'refund'], 'two holds refunded, one charged');
  const v = await server.cli(['ledger', 'verify']);
  t.equal(v.json.ok, true);
});
