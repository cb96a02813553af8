import t from 'tap';
import { reserveInput, tokenRecord } from '../../bench/harness/records.ts';
import { embeddedStore, LmdbBackend } from '../../src/store/lmdb/index.ts';
import { heldIndexed } from '../../src/store/lmdb/held.ts';
import { tempDir } from '../helpers/server.ts';

// The held indexes (pending and settlement_failed reservations, src/store/lmdb/held.ts) count as
// complete while the ledger's last key is the one this build noted. A prune that empties the
// ledger took that key with it, so the next start judged the store written by another build:
// it read every reservation again and forgot the expiry index. The note now goes with the last
// entry.
t.test('a ledger pruned empty leaves the held indexes known complete', async (t) => {
  const backend = LmdbBackend.open(tempDir());
  t.teardown(() => backend.close());
  const store = embeddedStore(backend)!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
  await backend.insertToken(tok);
  const at = Date.now() - 86_400_000;
  for (let i = 0; i < 3; i++) {
    const out = await backend.reserve(reserveInput(tok, { at }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    t.equal((await backend.settle(out.reservation, at, (usage) => JSON.stringify({ usage }), [])).kind, 'settled');
  }
  t.ok(heldIndexed(store), 'complete before');
  t.equal(await backend.pruneLedgerBefore(Date.now()), 3, 'every entry pruned');
  t.ok(heldIndexed(store), 'and still known complete after (it read as another build\'s store)');
  t.ok((await backend.verifyLedger()).ok);
});
