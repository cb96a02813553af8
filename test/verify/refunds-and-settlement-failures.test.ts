// What a call that fails after its reservation leaves behind, in process: an inference failure
// refunds the units before answering; a settlement the store holds for the operator keeps them
// (and the key pending); a settlement or refund the store could not write answers 503 with
// Retry-After, saying which, and the operator hears of it in the log.

import t from 'tap';
import { request, single } from '../helpers/captures.ts';
import { addToken, bodyCode, call, codeOf, RETRY_AFTER_SECONDS, world } from './fakes.ts';

const body = () => request([single({ id: 'fail-1' })]);

t.test('inference_failed: the units are refunded before the answer, nothing is charged', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.inference.fault = 'inference_failed';
  const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-1' });
  t.equal(answer.status, 500);
  t.equal(codeOf(answer, 'infer'), 'inference_failed');
  t.same(w.store.ledger.map((e) => e.kind), ['charge', 'refund']);
  t.equal(w.store.usedBy(token), 0);
  t.ok(w.calls.indexOf('refund') < w.calls.indexOf('audit'), 'refunded before the answer');
  t.notOk(w.calls.includes('settle'));
  t.match(w.facts, [{ status: 500, errorCode: 'inference_failed', reserved: 1, refunded: 1, charged: 0 }]);
  t.match(w.store.audits, [{ status: 500, error_code: 'inference_failed', charged_units: 0, outcome: 'error' }]);
  t.same(w.logs, [], 'a declared failure without a cause is not logged');
});

t.test('an engine that crashes: refunded the same, answered internal_error without its message, logged', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.inference.fault = 'crash';
  const answer = await call(w, plaintext, body(), { requestId: 'req-crash' });
  t.equal(answer.status, 500);
  t.equal(codeOf(answer, 'any'), 'internal_error');
  t.notMatch(answer.body as string, 'engine thread gone', 'the message stays in the log');
  t.equal(w.store.usedBy(token), 0, 'refunded');
  t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: 'req-crash', err: { message: 'engine thread gone' } } }]);
});

t.test('a refund the store cannot write: 503 store_unavailable with Retry-After, the refund owed and logged', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.inference.fault = 'inference_failed';
  w.store.refundFault = true;
  const answer = await call(w, plaintext, body(), { requestId: 'req-owed' });
  t.equal(answer.status, 503);
  t.equal(codeOf(answer, 'infer'), 'store_unavailable');
  t.equal(answer.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS));
  t.match(JSON.parse(answer.body as string).error.message, /given back as soon as the store can write again/, 'says the refund is owed');
  t.equal(w.store.usedBy(token), 1, 'the fake store wrote no refund');
  t.match(w.facts, [{ reserved: 1, refunded: 0 }], 'the metrics count no refund that was not made');
  t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: 'req-owed', cause: 'ENOSPC: no space left on device' } }]);
});

t.test('settlement_failed: the units stay held and the key pending for the operator; a retry hears the same', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.store.settleFault = 'settlement_failed';
  const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-held' });
  t.equal(answer.status, 500);
  t.equal(codeOf(answer, 'settle'), 'settlement_failed');
  t.same(w.store.ledger.map((e) => e.kind), ['charge'], 'no refund: the operator decides');
  t.equal(w.store.usedBy(token), 1);
  t.match(w.facts, [{ reserved: 1, refunded: 0, charged: 0 }]);
  t.match(w.store.audits, [{ status: 500, error_code: 'settlement_failed', charged_units: 0, outcome: 'error' }]);

  const retry = await call(w, plaintext, body(), { idempotencyKey: 'k-held' });
  t.equal(codeOf(retry, 'reserve'), 'settlement_failed', 'not request_in_progress: polling would never end');
  t.equal(w.inference.calls, 1);
});

t.test('a settlement the store could not write: 503 with Retry-After, the units given back, the key free', async (t) => {
  const w = world();
  const { token, plaintext } = addToken(w);
  w.store.settleFault = 'not_written';
  const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-disk', requestId: 'req-disk' });
  t.equal(answer.status, 503);
  t.equal(codeOf(answer, 'settle'), 'store_unavailable');
  t.equal(bodyCode(answer), 'store_unavailable');
  t.equal(answer.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS), 'retried like a busy server');
  t.match(w.facts, [{ reserved: 1, refunded: 1, charged: 0 }]);
  t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: 'req-disk', cause: 'ENOSPC: no space left on device', err: { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } } } }]);

  const retry = await call(w, plaintext, body(), { idempotencyKey: 'k-disk' });
  t.equal(codeOf(retry, 'settle'), 'verdict', 'the retry runs afresh');
  t.same(w.store.ledger.map((e) => e.kind), ['charge', 'refund', 'charge']);
  t.equal(w.store.usedBy(token), 1);
});
