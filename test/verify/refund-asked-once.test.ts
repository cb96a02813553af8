// Each refund of a verify call is asked of the store once, in process on a real store
// (test/verify/world.ts): an inference that fails, or an engine that crashes, refunds the
// reservation once before the answer; a settlement the store could not write was given back
// by the store itself (its outcome says `refunded`), so the use case asks for no second
// refund. The store's refund is idempotent, so a second request would not show in the ledger
// while the store's rule holds: this file holds the use case to its own half of "one refund per
// reservation" (src/verify/verify.ts, infer and settle), which issue 43's mutation check
// (bench/results/mutation-check.md, "a refund that refunds twice" planted in the use case)
// found held by no test.

import t, { type Test } from 'tap';
import type { StoreBackend } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, bothStores, call, codeOf, diskFull, settlementOnFullDisk, ledger, lmdbStore, usedBy, world } from './world.ts';

const body = () => request([single({ id: 'once-1' }), single({ id: 'once-2' })]);
const refunds = (calls: string[]) => calls.filter((c) => c === 'refund').length;
const stores = await bothStores(t);

function refundOnce(t: Test, store: StoreBackend) {
  for (const fault of ['inference_failed', 'crash'] as const) {
    t.test(`an engine that fails (${fault}): one refund asked, before the answer`, async (t) => {
      const w = world(store);
      const { token, plaintext } = await addToken(w);
      w.inference.fault = fault;
      const answer = await call(w, plaintext, body(), { idempotencyKey: `k-${fault}` });
      t.equal(answer.status, 500);
      t.equal(refunds(w.calls), 1, 'the store is asked for the refund once');
      t.ok(w.calls.indexOf('refund') < w.calls.indexOf('audit'), 'before the answer is audited');
      t.same(await ledger(w, token), [{ kind: 'charge', units: 2 }, { kind: 'refund', units: 2 }]);
      t.equal(await usedBy(w, token), 0);
      t.match(w.facts, [{ reserved: 2, refunded: 2, charged: 0 }]);
    });
  }
}

for (const s of stores) t.test(`on ${s.kind}`, async (t) => refundOnce(t, s.store));

// A settlement the store could not write (a full disk: LMDB's commits fail with ENOSPC), in the
// metering writer thread and on the API worker's own thread, which commits once the writer has
// ended (src/store/lmdb/writer.ts meteringWrite)
const paths = [
  { committer: 'the metering writer thread', store: stores.find((s) => s.kind === 'lmdb')!.store },
  { committer: 'the API worker\'s own thread (no writer)', store: lmdbStore(t, { meteringWriter: false }).store },
];
for (const { committer, store: lmdb } of paths) {
  t.test(`a settlement the store could not write and gave back (committed by ${committer}): no refund asked by the use case`, async (t) => {
    const w = world(lmdb);
    const { token, plaintext } = await addToken(w);
    // the settlement's commit fails; the store's own refund after it finds room
    const { answer, disk } = await settlementOnFullDisk(w, lmdb, () => call(w, plaintext, body(), { idempotencyKey: 'k-given-back' }));
    t.equal(answer.status, 503);
    t.equal(codeOf(answer, 'settle'), 'store_unavailable');
    t.equal(refunds(w.calls), 0, 'the store gave the units back in its settlement: the use case asks for no refund');
    t.same(await ledger(w, token), [{ kind: 'charge', units: 2 }, { kind: 'refund', units: 2 }], 'one refund in the ledger');
    t.equal(await usedBy(w, token), 0);
    t.match(w.facts, [{ reserved: 2, refunded: 2, charged: 0 }], 'counted refunded once');
    await disk.free();
  });
}
