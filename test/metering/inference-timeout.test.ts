import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// A hung inference must not hold a reservation and its key until the next restart.
// The service's app and engine in process (test/helpers/api.ts; issue 43: this was a server
// start): the timeout is the API worker's (src/cluster/remote-inference.ts RemoteInference,
// INFERENCE_TIMEOUT_SECONDS), its late result comes back through the same relay
// (src/cluster/relay.ts relayInference) from the engine, which adds the test delay
// (src/cluster/engine-host.ts), and the settlement is the verify use case's on the real LMDB
// store, read here through the harness's own handle.
const server = await startApi({
  engine: 'real',
  ready: true,
  env: { INFERENCE_TIMEOUT_SECONDS: '1', TEST_INFERENCE_DELAY_MS: '3000', TEST_INFERENCE_DELAY_PREFIX: 'hung-' },
});
t.teardown(() => server.stop());

/** lv_inference_late_results_total, summed over the API workers by /metrics */
const lateResults = async (): Promise<number> => {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  return Number(/^lv_inference_late_results_total(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0);
};
const used = async (token: string) => (await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used;

t.test('no result within INFERENCE_TIMEOUT_SECONDS: 500 inference_failed, refunded, key released', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:5:day']);
  const body = request([single({ id: 'hung-1' })]);
  const started = Date.now();
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-hung' });
  const took = Date.now() - started;
  t.equal(r.status, 500, r.text);
  t.equal(r.json.error.code, 'inference_failed');
  // The 500 itself says the timeout answered, not the result: the result would have been a 200
  // with a verdict. No upper bound on `took`: a loaded host only lengthens it (an upper bound of
  // 2.9 s is a timing assertion that load can break); the lower bound is the timeout's.
  t.ok(took >= 900, `answered at the timeout, not before it (${took} ms)`);
  t.equal(await used(token), 0, 'the units came back');

  const again = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-hung' });
  // released, the key runs the same capture again, which hangs again: the timeout's 500, not a
  // 409 request_in_progress (nor any other refusal, which `not 409` let through)
  t.equal(again.status, 500, `the key was released: the same key runs again (${again.text.slice(0, 200)})`);
  t.equal(again.json.error.code, 'inference_failed');
  const fast = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'fast-1' })]));
  t.equal(fast.status, 200, 'the slots came back');

  // Both hung calls' results arrive late (3 s after hand-off) and are dropped; the service
  // counts each drop, so the test awaits that event and then looks at the charged state once.
  await waitFor(async () => (await lateResults()) >= 2, { what: 'both late inference results dropped', timeoutMs: 30_000 });
  t.equal(await lateResults(), 2, 'exactly the two hung calls had late results');
  const db = server.lmdb!.db;
  (db.ledger as any).resetReadTxn?.();
  const kinds = [...db.ledger.getRange({})].map((e) => e.value as any).filter((e) => e.token_id === id).map((e) => e.kind).sort();
  t.same({ used: await used(token), kinds }, { used: 1, kinds: ['charge', 'charge', 'charge', 'refund', 'refund'] },
    'only the call that got a verdict is charged, after the late results too (two holds refunded, one charged)');
  t.equal((await server.store.verifyLedger()).ok, true, 'ledger verify holds');
});
