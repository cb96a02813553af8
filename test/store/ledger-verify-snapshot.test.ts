import { createRequire } from 'node:module';
import t from 'tap';
import { reserveInput, tokenRecord } from '../../bench/harness/records.ts';
import { embeddedStore, LmdbBackend } from '../../src/store/lmdb/index.ts';
import { spawnChildSync, tempDir } from '../helpers/server.ts';

// `ledger verify` read the ledger inside a write transaction, which holds LMDB's one writer for
// the whole check: beside a running service every reservation and settlement waited for it
// (6 s on 1.5 million entries). It reads one snapshot now. Here another process writes while
// the check is between its reads: the write must not wait for the check, the check must see
// the store as it was when it began, and the next check must see the write.

// another process (the service beside the CLI's check) adds 5 units to the first counter, in
// a write transaction of its own, and says so once it is durable (lmdb-js syncs a commit after
// it returns; what is not synced is not seen by other processes). It then ends itself with
// SIGKILL: lmdb-js's clean-up at exit waits for the other processes on the store to turn their
// event loops, which this test holds in the check.
const BUMP = `
const fs = require('node:fs');
const [lmdb, dir] = process.argv.slice(1);
const { open } = require(lmdb);
const root = open({ path: dir, maxDbs: 32, compression: false });
const counters = root.openDB({ name: 'counters' });
const [first] = counters.getRange({ limit: 1 });
root.transactionSync(() => counters.put(first.key, first.value + 5));
root.flushed.then(() => {
  fs.writeSync(1, JSON.stringify(first.key));
  process.kill(process.pid, 'SIGKILL');
});
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

  // the counters are the check's last read: the other process writes just before it, the
  // check waiting until that write has committed (a check that holds the writer holds the
  // other process until the bound kills it, the write never made)
  const lmdb = createRequire(import.meta.url).resolve('lmdb');
  const counters = store.db.counters;
  const ownRange = counters.getRange.bind(counters);
  let bump: ReturnType<typeof spawnChildSync> | null = null;
  counters.getRange = ((options) => {
    bump ??= spawnChildSync(process.execPath, ['-e', BUMP, lmdb, store.dir], { encoding: 'utf8', timeout: 30_000, killSignal: 'SIGKILL' });
    return ownRange(options);
  }) as typeof counters.getRange;
  const during = await backend.verifyLedger();
  counters.getRange = ownRange;
  t.ok(bump, 'the other process ran while the check did');
  t.notOk((bump!.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT', 'its write did not wait for the check (it ran past its bound, waiting for the writer the check held)');
  t.not(bump!.stdout, '', `its write committed while the check ran ${bump!.stderr}`);
  const key = bump!.stdout === '' ? null : JSON.parse(bump!.stdout);
  t.same({ ok: during.ok, entries: during.entries, mismatches: during.mismatches }, { ok: true, entries: 3, mismatches: [] }, 'the check read the store as it was when it began');

  const after = await backend.verifyLedger();
  t.equal(after.ok, false, 'the next check sees the counter no ledger entry accounts for');
  t.same(after.mismatches.map((m) => ({ key: m.key, over: m.counter - m.ledger })), [{ key, over: 5 }]);
});
