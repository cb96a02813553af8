import t from 'tap';
import { openStore } from '../../src/store/lmdb/open.ts';
import { pruneAuditBefore } from '../../src/store/lmdb/retention.ts';
import { forgetExpiryIndex } from '../../src/store/lmdb/expiry.ts';
import { tempDir } from '../helpers/server.ts';

// A store pruned by a build that left the per-token index behind holds index entries of rows
// long gone (every call's two, for ever): the first prune pass of this build drops them once,
// keeps the entries of rows still there, and flags the store so later passes read nothing extra.
t.test('the per-token index entries of rows pruned before are dropped once, the live ones kept', async (t) => {
  const store = openStore(tempDir());
  t.teardown(() => store.close());
  const audit = { token_id: 'tok_a', request_id: 'req_live' } as never;
  await store.root.transaction(() => {
    void store.db.audit.put([2000, 'req_live'], audit);
    void store.db.byToken.put(['audit', 'tok_a', 2000, 'req_live'], 1);
    // left by the old pruner: rows gone, entries kept
    for (let i = 0; i < 1200; i++) void store.db.byToken.put(['audit', 'tok_a', 1000 + i, `req_${i}`], 1);
    void store.db.byToken.put(['ledger', 'tok_b', 1500, 'led_gone'], 1);
    void store.db.meta.remove('by_token_pruned_v1');
  });
  t.equal(store.db.byToken.getKeysCount(), 1202);
  // a cutoff before every row: nothing of the rows is pruned, only the orphans go
  t.equal(await pruneAuditBefore(store, 0), 0);
  t.same([...store.db.byToken.getKeys({})], [['audit', 'tok_a', 2000, 'req_live']], 'only the live row\'s entry is left');
  t.equal(store.db.meta.get('by_token_pruned_v1'), true, 'flagged: done once');
});

t.test('another build\'s writes found (db migrate, recovery): the orphans are looked for again at the next prune', async (t) => {
  const store = openStore(tempDir());
  t.teardown(() => store.close());
  t.equal(store.db.meta.get('by_token_pruned_v1'), true, 'a new store has none');
  await forgetExpiryIndex(store);
  t.equal(store.db.meta.get('by_token_pruned_v1'), undefined, 'forgotten with the expiry index: an older build may have pruned rows and left their entries');
  await store.root.transaction(() => void store.db.byToken.put(['ledger', 'tok_x', 1, 'led_gone'], 1));
  await pruneAuditBefore(store, 0);
  t.equal(store.db.byToken.getKeysCount(), 0, 'and the next prune drops them');
});
