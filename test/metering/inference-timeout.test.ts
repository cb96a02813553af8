import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

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
  // the second hung call was answered at its timeout (1 s after hand-off); its late result is
  // produced 3 s after hand-off, so about 2 s from now
  const lateDueAt = Date.now() + 2_000;
  const fast = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'fast-1' })]));
  t.equal(fast.status, 200, 'the slots came back');

  // A dropped late result writes nothing, so there is no event to await (the service exposes
  // none). Instead of one sleep and one look, the charged state is watched through the whole
  // window in which the late results arrive (plus a margin): any charge they made would show.
  const db = lmdbOpen(server.dataDir);
  const kindsNow = () => {
    (db.ledger as any).resetReadTxn?.();
    return [...db.ledger.getRange({})].map((e) => e.value as any).filter((e) => e.token_id === id).map((e) => e.kind).sort();
  };
  const expected = ['charge', 'charge', 'charge', 'refund', 'refund'];
  const state = async () => JSON.stringify({ used: await used(token), kinds: kindsNow() });
  const want = JSON.stringify({ used: 1, kinds: expected });
  await waitFor(async () => (await state()) === want, { what: 'the refunds and the one charge' }).catch(() => undefined);
  const seen = new Set<string>();
  do {
    seen.add(await state());
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < lateDueAt + 2_500);
  seen.add(await state());
  await db.close();
  t.same([...seen], [want], 'only the call that got a verdict is charged, before and after the late results (two holds refunded, one charged)');
  const v = await server.cli(['ledger', 'verify']);
  t.equal(v.json.ok, true);
});
