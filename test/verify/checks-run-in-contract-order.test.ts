// The use case's check order, in process (src/verify/verify.ts): auth, module, grant, enabled,
// ready, store writing, then the slot, the key's shape, the body, the packet rules, quota and
// the reservation, inference, settlement. A call that fails one check never reaches the next:
// each case below breaks every later check too, and must still get the earlier answer.

import t from 'tap';
import { generateToken } from '../../src/auth/business-token.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, call, codeOf, world } from './fakes.ts';

const valid = () => request([single({ id: 'order-1' })]);

/** A packet whose image no longer matches its declared hash: a 422 of the packet rules. */
function brokenImage() {
  const b = request([single({ id: 'order-broken' })]);
  const at = b.body.length - 200; // inside the last (image) part, before the closing boundary
  b.body[at] = b.body[at]! ^ 0xff;
  return b;
}

t.test('an answered call goes through the ports in the contract order, and gives its slot back before it is audited', async (t) => {
  const w = world();
  const { plaintext } = addToken(w);
  const answer = await call(w, plaintext, valid());
  t.equal(answer.status, 200);
  t.equal(codeOf(answer, 'settle'), 'verdict');
  t.same(w.calls, ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'settle', 'slot released', 'audit', 'sign']);
  t.ok(answer.headers?.['X-Verdict-Signature'], 'signed');
});

t.test('each check answers before any later one runs', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
  // every check after the one under test is broken too
  w.store.used.set(`${token.id}/rgb_liveness`, 1);
  w.store.disabledModules.add('rgb_liveness');
  w.store.writesFailing = true;
  w.inference.ready = false;
  w.inference.fault = 'inference_failed';
  const cases: { what: string; fix?: () => void; send: () => Promise<import('../../src/verify/index.ts').VerifyAnswer>; status: number; code: string; step: Parameters<typeof codeOf>[1]; reached: string[] }[] = [
    { what: 'an unknown token', send: () => call(w, generateToken(), brokenImage(), { module: 'face_liveness', idempotencyKey: 'has space' }), status: 401, code: 'invalid_token', step: 'accept', reached: ['token'] },
    { what: 'an unknown module', send: () => call(w, plaintext, brokenImage(), { module: 'face_liveness', idempotencyKey: 'has space' }), status: 404, code: 'module_not_found', step: 'accept', reached: ['token'] },
    { what: 'a module not granted', send: () => call(w, plaintext, brokenImage(), { module: 'color_liveness', idempotencyKey: 'has space' }), status: 403, code: 'module_forbidden', step: 'accept', reached: ['token'] },
    { what: 'a disabled module', send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 403, code: 'module_disabled', step: 'accept', reached: ['token', 'moduleEnabled'] },
    { what: 'models not loaded', fix: () => w.store.disabledModules.clear(), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 503, code: 'module_unavailable', step: 'accept', reached: ['token', 'moduleEnabled', 'readiness'] },
    { what: 'a store failing writes', fix: () => (w.inference.ready = true), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 503, code: 'store_unavailable', step: 'accept', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing'] },
    { what: 'a malformed Idempotency-Key', fix: () => (w.store.writesFailing = false), send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'has space' }), status: 400, code: 'invalid_idempotency_key', step: 'receive', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'slot released'] },
    { what: 'a packet breaking the rules', send: () => call(w, plaintext, brokenImage(), { idempotencyKey: 'k-1' }), status: 422, code: 'invalid_input', step: 'validate', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'slot released'] },
    { what: 'a quota used up', send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 429, code: 'quota_exceeded', step: 'reserve', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'slot released'] },
    { what: 'inference failing', fix: () => w.store.used.clear(), send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 500, code: 'inference_failed', step: 'infer', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'refund', 'slot released'] },
    { what: 'nothing wrong', send: () => call(w, plaintext, valid(), { idempotencyKey: 'k-1' }), status: 200, code: 'verdict', step: 'settle', reached: ['token', 'moduleEnabled', 'readiness', 'writesFailing', 'slot', 'body', 'reserve', 'infer', 'settle', 'slot released'] },
  ];
  for (const c of cases) {
    c.fix?.();
    w.calls.length = 0;
    const answer = await c.send();
    t.equal(answer.status, c.status, c.what);
    t.equal(codeOf(answer, c.step), c.code, `${c.what}: ${c.code}, an answer of ${c.step}`);
    t.same(w.calls, [...c.reached, 'audit', 'sign'], `${c.what}: no later check ran`);
  }
  t.equal(w.store.charges(), 2, 'only the inference failure and the answered call were charged');
  t.same(w.store.ledger.map((e) => e.kind), ['charge', 'refund', 'charge'], 'the failed inference was refunded');
});

t.test('every refusal is audited with the code the client got, and signed', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.store.disabledModules.add('rgb_liveness');
  const answer = await call(w, plaintext, valid(), { requestId: 'req-disabled' });
  t.equal(answer.status, 403);
  t.equal(JSON.parse(answer.body as string).error.code, 'module_disabled');
  t.ok(answer.headers?.['X-Verdict-Signature'], 'the refusal is signed');
  t.match(w.store.audits, [{ request_id: 'req-disabled', token_id: token.id, module_id: 'rgb_liveness', status: 403, error_code: 'module_disabled', charged_units: 0, outcome: 'error', at: new Date(w.clock.at).toISOString() }]);
  t.match(w.facts, [{ status: 403, errorCode: 'module_disabled', replayed: false, reserved: 0 }]);
});
