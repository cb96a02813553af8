import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { reserveInput, tokenRecord } from '../../bench/harness/records.ts';
import { embeddedStore, LmdbBackend } from '../../src/store/lmdb/index.ts';
import { tempDir } from '../helpers/server.ts';

// `ledger verify` read the ledger inside a write transaction, which holds LMDB's one writer for
// the whole check: beside a running service every reservation and settlement waited for it
// (6 s on 1.5 million entries). It reads one snapshot now. Here another writer writes while
// the check is between its reads: the write must not wait for the check, the check must see
// the store as it was when it began, and the next check must see the write.

// another thread of this process (the service's metering writer beside a check it runs, or
// another process: LMDB's writer lock is the same for both) adds 5 units to the first counter,
// in a write transaction of its own, and says when it has committed
const BUMP = `
const { workerData, parentPort } = require('node:worker_threads');
const { open } = require(workerData.lmdb);
const root = open({ path: workerData.dir, maxDbs: 32, compression: false });
const counters = root.openDB({ name: 'counters' });
const [first] = counters.getRange({ limit: 1 });
root.transactionSync(() => counters.put(first.key, first.value + 5));
parentPort.postMessage(first.key);
const done = new Int32Array(workerData.done);
Atomics.store(done, 0, 1);
Atomics.notify(done, 0);
`;

t.test('ledger verify takes no writer: a write made while it reads goes through, and the next check sees it', async (t) => {
  const backend = LmdbBackend.open(tempDir());
  t.teardown(() => backend.close());
  const store = embeddedStore(backend)!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await backend.insertToken(tok);
  for (let i = 0; i < 3; i++) {
    const out = await backend.reserve(reserveInput(tok));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    t.equal((await backend.settle(out.reservation, Date.now(), (usage) => JSON.stringify({ usage }), [])).kind, 'settled');
  }
  t.ok((await backend.verifyLedger()).ok, 'consistent to begin with');

  // the counters are the check's last read: the other writer writes just before it, and the
  // check goes on once that write has committed (a check that holds the writer waits here until
  // the bound, the write never made)
  const counters = store.db.counters;
  const ownRange = counters.getRange.bind(counters);
  const done = new Int32Array(new SharedArrayBuffer(4));
  let worker: Worker | null = null;
  let bumped: Promise<unknown[]> | null = null;
  let waited: string | null = null;
  counters.getRange = ((options) => {
    if (!worker) {
      worker = new Worker(BUMP, { eval: true, workerData: { lmdb: createRequire(import.meta.url).resolve('lmdb'), dir: store.dir, done: done.buffer } });
      bumped = once(worker, 'message');
      waited = Atomics.wait(done, 0, 0, 30_000);
    }
    return ownRange(options);
  }) as typeof counters.getRange;
  const during = await backend.verifyLedger();
  counters.getRange = ownRange;
  t.equal(waited, 'ok', 'the other write committed while the check ran (it did not wait for the check)');
  const [key] = await bumped!;
  await worker!.terminate();
  t.same({ ok: during.ok, entries: during.entries, mismatches: during.mismatches }, { ok: true, entries: 3, mismatches: [] }, 'the check read the store as it was when it began');

  const after = await backend.verifyLedger();
  t.equal(after.ok, false, 'the next check sees the counter no ledger entry accounts for');
  t.same(after.mismatches.map((m) => ({ key: m.key, over: m.counter - m.ledger })), [{ key, over: 5 }]);
});
