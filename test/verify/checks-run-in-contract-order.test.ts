// The use case's check order, in process (src/verify/verify.ts): auth, module, grant, enabled,
// ready, store writing, then the slot, the key's shape, the body, the packet rules, quota and
// the reservation, inference, settlement. A call that fails one check never reaches the next:
// each case below breaks every later check too, and must still get the earlier answer.
// On a real LMDB store (test/verify/world.ts): the quota, the module switch and the failing
// writes are the store's own.
// Replaces the spawned test/verify/check-order.test.ts (one server, two CLI runs): its order
// (token, module, grant, enabled, then the Idempotency-Key's shape) is the case list below,
// the module switched off as `module disable` does (store.setModuleEnabled; the CLI command
// has its own tests), and its last cases are the test at the end: a token granted colour only,
// RGB and colour in one request, and a call without an Authorization header (a session
// cookie is no business token: GET /v1/me authenticates with the same authenticateCaller, from
// the Authorization header alone).

import t from 'tap';
import { generateToken } from '../../src/auth/business-token.ts';
import { setGrant } from '../../src/admin/tokens.ts';
import type { VerifyAnswer } from '../../src/verify/index.ts';
import { color, request, single } from '../helpers/captures.ts';
import { addToken, audits, call, codeOf, ledger, lmdbStore, world, writesFailing } from './world.ts';

const { store } = lmdbStore(t);

const valid = () => request([single({ id: 'order-1' })]);

/** A packet whose image no longer matches its declared hash: a 422 of the packet rules. */
function brokenImage() {
  const b = request([single({ id: 'order-broken' })]);
  const at = b.body.length - 200; // inside the last (image) part, before the closing boundary
  b.body[at] = b.body[at]! ^ 0xff;
  return b;
}

t.test('an answered call goes through the ports in the contract order, and gives its slot back before it is audited', async (t) => {
  const w = world(store);
  const { plaintext } = await addToken(w);
  const answer = await call(w, plaintext, valid());
  t.equal(answer.status, 200);
  t.equal(codeOf(answer, 'settle'), 'verdict');
  t.same(w.calls, ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'settle', 'slot released', 'audit', 'sign']);
  t.ok(answer.headers?.['X-Verdict-Signature'], 'signed');
});

t.test('each check answers before any later one runs', async (t) => {
  const w = world(store);
  const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
  // every check after the one under test is broken too: the quota used up by a call...
  t.equal((await call(w, plaintext, valid())).status, 200);
  await store.setModuleEnabled('rgb_liveness', false);
  t.teardown(() => store.setModuleEnabled('rgb_liveness', true));
  const failing = await writesFailing(store);
  w.inference.ready = false;
  w.inference.fault = 'inference_failed';
  const cases: { what: string; fix?: () => unknown; send: () => Promise<VerifyAnswer>; status: number; code: string; step: Parameters<typeof codeOf>[1]; reached: string[] }[] = [
    { what: 'an unknown token', send: () => call(w, generateToken(), brokenImage(), { module: 'face_liveness', idempotencyKey: 'has space' }), status: 401, code: 'invalid_token', step: 'accept', reached: ['token'] },
    { what: 'an unknown module', send: () => call(w, plaintext, brokenImage(), { module: 'face_liveness', idempotencyKey: 'has space' }), status: 404, code: 'module_not_found', step: 'accept', reached: ['token'] },
    { what: 'a module not granted', send: () => call(w, plaintext, brokenImage(), { module: 'color_liveness', idempotencyKey: 'has space' }), status: 403, code: 'module_forbidden', step: 'accept', reached: ['token'] },
    { what: 'a disabled module', send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 403, code: 'module_disabled', step: 'accept', reached: ['token', 'moduleEnabled'] },
    { what: 'models not loaded', fix: () => store.setModuleEnabled('rgb_liveness', true), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 503, code: 'module_unavailable', step: 'accept', reached: ['token', 'moduleEnabled', 'readiness'] },
    { what: 'a store failing writes', fix: () => (w.inference.ready = true), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 503, code: 'store_unavailable', step: 'accept', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing'] },
    { what: 'a malformed Idempotency-Key', fix: () => failing.free(), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 400, code: 'invalid_idempotency_key', step: 'receive', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'slot released'] },
    { what: 'a packet breaking the rules', send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'k-1' }), status: 422, code: 'invalid_input', step: 'validate', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'slot released'] },
    { what: 'a quota used up', send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 429, code: 'quota_exceeded', step: 'reserve', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'slot released'] },
    { what: 'inference failing', fix: () => setGrant(store, token.id, { module_id: 'rgb_liveness', limit: 3, period: 'day' }), send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 500, code: 'inference_failed', step: 'infer', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'refund', 'slot released'] },
    { what: 'nothing wrong', send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 200, code: 'verdict', step: 'settle', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'settle', 'slot released'] },
  ];
  for (const c of cases) {
    await c.fix?.();
    w.calls.length = 0;
    const answer = await c.send();
    t.equal(answer.status, c.status, c.what);
    t.equal(codeOf(answer, c.step), c.code, `${c.what}: ${c.code}, an answer of ${c.step}`);
    t.same(w.calls, [...c.reached, 'audit', 'sign'], `${c.what}: no later check ran`);
  }
  t.same((await ledger(w, token)).map((e) => e.kind), ['charge', 'charge', 'refund', 'charge'], 'besides the call that used the quota up, only the inference failure and the answered call were charged, and the failed inference was refunded');
});

t.test('every refusal is audited with the code the client got, and signed', async (t) => {
  const w = world(store);
  const { token, plaintext } = await addToken(w);
  await store.setModuleEnabled('rgb_liveness', false);
  t.teardown(() => store.setModuleEnabled('rgb_liveness', true));
  const answer = await call(w, plaintext, valid(), { requestId: 'req-disabled' });
  t.equal(answer.status, 403);
  t.equal(JSON.parse(answer.body as string).error.code, 'module_disabled');
  t.ok(answer.headers?.['X-Verdict-Signature'], 'the refusal is signed');
  t.match(await audits(w, token, 1), [{ request_id: 'req-disabled', token_id: token.id, module_id: 'rgb_liveness', status: 403, error_code: 'module_disabled', charged_units: 0, outcome: 'error', at: new Date(w.clock.at).toISOString() }]);
  t.match(w.facts, [{ status: 403, errorCode: 'module_disabled', replayed: false, reserved: 0 }]);
});

t.test('a token granted colour only is refused RGB; RGB and colour never share a request; no Authorization header is no token', async (t) => {
  const w = world(store);
  const { plaintext: colorOnly } = await addToken(w, [{ module_id: 'color_liveness', limit: 5 }]);
  const forbidden = await call(w, colorOnly, valid());
  t.equal(forbidden.status, 403);
  t.equal(codeOf(forbidden, 'accept'), 'module_forbidden');
  const mixed = await call(w, colorOnly, request([color(), single()]), { module: 'color_liveness' });
  t.equal(mixed.status, 422, 'RGB and colour never share a request');
  t.equal(codeOf(mixed, 'validate'), 'invalid_input');
  const anonymous = await call(w, colorOnly, valid(), { authorization: undefined });
  t.equal(anonymous.status, 401);
  t.equal(codeOf(anonymous, 'accept'), 'invalid_token');
  t.equal(w.inference.calls, 0);
});
