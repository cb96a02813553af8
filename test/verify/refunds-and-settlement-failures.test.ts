// What a call that fails after its reservation leaves behind, in process on a real store
// (test/verify/world.ts): an inference failure refunds the units before answering; a
// settlement the store holds for the operator keeps them (and the key pending); a settlement
// or refund the store could not write (a full disk, LMDB) answers 503 with Retry-After,
// saying which, the operator hears of it in the log, and what is owed is given back once the
// disk has room again. LMDB's store is an API worker's handle: its metering writes commit in
// the process's metering writer thread, where the full disk is planted (world.ts diskFull).

import t, { type Test } from 'tap';
import type { StoreBackend } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, audits, bodyCode, bothStores, call, codeOf, diskFull, settlementOnFullDisk, failNextSettlement, ledger, lmdbStore, RETRY_AFTER_SECONDS, usedBy, world } from './world.ts';

const body = () => request([single({ id: 'fail-1' })]);
const stores = await bothStores(t);

function failures(t: Test, store: StoreBackend) {
  t.test('inference_failed: the units are refunded before the answer, nothing is charged', async (t) => {
    const w = world(store);
    const { token, plaintext } = await addToken(w);
    w.inference.fault = 'inference_failed';
    const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-1' });
    t.equal(answer.status, 500);
    t.equal(codeOf(answer, 'infer'), 'inference_failed');
    t.same((await ledger(w, token)).map((e) => e.kind), ['charge', 'refund']);
    t.equal(await usedBy(w, token), 0);
    t.ok(w.calls.indexOf('refund') < w.calls.indexOf('audit'), 'refunded before the answer');
    t.notOk(w.calls.includes('settle'));
    t.match(w.facts, [{ status: 500, errorCode: 'inference_failed', reserved: 1, refunded: 1, charged: 0 }]);
    t.match(await audits(w, token, 1), [{ status: 500, error_code: 'inference_failed', charged_units: 0, outcome: 'error' }]);
    t.same(w.logs, [], 'a declared failure without a cause is not logged');
  });

  t.test('an engine that crashes: refunded the same, answered internal_error without its message, logged', async (t) => {
    const w = world(store);
    const { token, plaintext } = await addToken(w);
    w.inference.fault = 'crash';
    const answer = await call(w, plaintext, body(), { requestId: `req-crash-${store.kind}` });
    t.equal(answer.status, 500);
    t.equal(codeOf(answer, 'any'), 'internal_error');
    t.notMatch(answer.body as string, 'engine thread gone', 'the message stays in the log');
    t.equal(await usedBy(w, token), 0, 'refunded');
    t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: `req-crash-${store.kind}`, err: { message: 'engine thread gone' } } }]);
  });

  t.test('settlement_failed: the units stay held and the key pending for the operator; a retry hears the same', async (t) => {
    const w = world(store);
    const { token, plaintext } = await addToken(w);
    failNextSettlement(store);
    const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-held' });
    t.equal(answer.status, 500);
    t.equal(codeOf(answer, 'settle'), 'settlement_failed');
    t.same((await ledger(w, token)).map((e) => e.kind), ['charge'], 'no refund: the operator decides');
    t.equal(await usedBy(w, token), 1);
    t.match(w.facts, [{ reserved: 1, refunded: 0, charged: 0 }]);
    t.match(await audits(w, token, 1), [{ status: 500, error_code: 'settlement_failed', charged_units: 0, outcome: 'error' }]);
    t.match(await store.listSettlementFailed(), [{ token_id: token.id, idempotency_key: 'k-held', units: 1 }], 'listed for the operator');

    const retry = await call(w, plaintext, body(), { idempotencyKey: 'k-held' });
    t.equal(codeOf(retry, 'reserve'), 'settlement_failed', 'not request_in_progress: polling would never end');
    t.equal(w.inference.calls, 1);
  });
}

for (const s of stores) t.test(`on ${s.kind}`, async (t) => failures(t, s.store));

// A full disk, on LMDB: its commits fail with ENOSPC (test/metering/full-disk.test.ts fills a
// real tmpfs through the server, as root, with both LMDB_COMMITS). On both threads that commit
// an API worker's metering writes with LMDB_COMMITS=sync: the metering writer, and the worker's
// own once the writer thread has ended (src/store/lmdb/writer.ts meteringWrite).
const paths = [
  { committer: 'the metering writer thread', store: stores.find((s) => s.kind === 'lmdb')!.store },
  { committer: 'the API worker\'s own thread (no writer)', store: lmdbStore(t, { meteringWriter: false }).store },
];
for (const { committer, store } of paths) t.test(`on LMDB, committed by ${committer}`, async (t) => fullDisk(t, store));

function fullDisk(t: Test, lmdb: StoreBackend) {
  t.test('a refund the store cannot write: 503 store_unavailable with Retry-After, the refund owed, logged, and made once the disk has room', async (t) => {
    const w = world(lmdb);
    const { token, plaintext } = await addToken(w);
    w.inference.fault = 'inference_failed';
    const held = w.inference.holdNext();
    const answering = call(w, plaintext, body(), { requestId: 'req-owed', idempotencyKey: 'k-owed' });
    await held.reached;
    // the reservation is written; the disk fills up before the refund
    const disk = await diskFull(lmdb);
    held.open();
    const answer = await answering;
    t.equal(answer.status, 503);
    t.equal(codeOf(answer, 'infer'), 'store_unavailable');
    t.equal(answer.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS));
    t.match(JSON.parse(answer.body as string).error.message, /given back as soon as the store can write again/, 'says the refund is owed');
    t.equal(await usedBy(w, token), 1, 'no refund written');
    t.match(w.facts, [{ reserved: 1, refunded: 0 }], 'the metrics count no refund that was not made');
    t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: 'req-owed', cause: /ENOSPC: no space left on device/ } }]);
    const refused = await call(w, plaintext, body(), { idempotencyKey: 'k-owed' });
    t.equal(codeOf(refused, 'accept'), 'store_unavailable', 'while writes fail, new calls are refused before their upload');

    await disk.free();
    t.equal(await usedBy(w, token), 0, 'the owed refund was made once the disk had room');
    t.same((await ledger(w, token)).map((e) => e.kind), ['charge', 'refund']);
    const retry = await call(w, plaintext, body(), { idempotencyKey: 'k-owed' });
    t.equal(codeOf(retry, 'settle'), 'verdict', 'the key was released with the refund: the retry runs afresh');
  });

  t.test('a settlement the store could not write: 503 with Retry-After, the units given back, the key free', async (t) => {
    const w = world(lmdb);
    const { token, plaintext } = await addToken(w);
    // the settlement's commit fails; the refund after it finds room
    const { answer, disk } = await settlementOnFullDisk(w, lmdb, () => call(w, plaintext, body(), { idempotencyKey: 'k-disk', requestId: 'req-disk' }));
    t.equal(answer.status, 503);
    t.equal(codeOf(answer, 'settle'), 'store_unavailable');
    t.equal(bodyCode(answer), 'store_unavailable');
    t.equal(answer.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS), 'retried like a busy server');
    t.match(JSON.parse(answer.body as string).error.message, /its units were given back and the Idempotency-Key released/);
    t.match(w.facts, [{ reserved: 1, refunded: 1, charged: 0 }]);
    t.match(w.logs, [{ msg: 'verify failed', obj: { request_id: 'req-disk', cause: /ENOSPC: no space left on device/, err: { headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) } } } }]);
    t.equal(await usedBy(w, token), 0, 'given back');

    await disk.free();
    const retry = await call(w, plaintext, body(), { idempotencyKey: 'k-disk' });
    t.equal(codeOf(retry, 'settle'), 'verdict', 'the retry runs afresh');
    t.same((await ledger(w, token)).map((e) => e.kind), ['charge', 'refund', 'charge']);
    t.equal(await usedBy(w, token), 1);
  });
}
