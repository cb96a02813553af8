import t from 'tap';
import { atomically, syncCommitFlags } from '../../src/store/lmdb/atomic.ts';
import { openStore, type LmdbCommits } from '../../src/store/lmdb/open.ts';
import { updateUser } from '../../src/store/lmdb/users.ts';
import { tempDir } from '../helpers/server.ts';
import type { LedgerEntry } from '../../src/store/index.ts';

/** A ledger entry of `units` (the databases are typed by their records). */
const ledgerEntry = (units: number): LedgerEntry => ({
  id: `e-${units}`, request_id: `r-${units}`, token_id: 't', module_id: 'rgb_liveness', units, kind: 'charge', at: '2026-01-01T00:00:00.000Z', windows: { day: '2026-01-01', month: '2026-01' },
});

// Both ways of committing (LMDB_COMMITS) keep the same guarantee.
for (const commits of ['sync', 'batched'] as LmdbCommits[]) {
  t.test(`commits: ${commits}`, async (t) => {
    const store = openStore(tempDir(), { commits });
    t.teardown(() => store.close());
    t.equal(store.commits, commits);

    t.test('a throw part-way leaves none of the transaction behind, across databases', async (t) => {
      await t.rejects(
        atomically(store, () => {
          void store.db.ledger.put('entry', ledgerEntry(1));
          void store.db.counters.put('counter', 1);
          throw new Error('fails after two writes');
        }),
        /fails after two writes/,
      );
      t.equal(store.db.ledger.get('entry'), undefined, 'the ledger write was rolled back');
      t.equal(store.db.counters.get('counter'), undefined, 'the counter write was rolled back');
    });

    t.test('a transaction that returns commits every write and gives back its value', async (t) => {
      const out = await atomically(store, () => {
        void store.db.ledger.put('entry', ledgerEntry(2));
        void store.db.counters.put('counter', 2);
        return 'done';
      });
      t.equal(out, 'done');
      t.same(store.db.ledger.get('entry'), ledgerEntry(2));
      t.equal(store.db.counters.get('counter'), 2);
    });

    t.test('concurrent transactions all commit, each whole', async (t) => {
      const n = 20;
      const results = await Promise.allSettled(Array.from({ length: n }, (_, i) => atomically(store, () => {
        void store.db.ledger.put(`c-${i}`, ledgerEntry(i));
        if (i % 5 === 0) throw new Error(`refused ${i}`);
        void store.db.counters.put(`c-${i}`, i);
        return i;
      })));
      t.equal(results.filter((r) => r.status === 'fulfilled').length, n - 4);
      for (let i = 0; i < n; i++) {
        const refused = i % 5 === 0;
        t.same(store.db.ledger.get(`c-${i}`), refused ? undefined : ledgerEntry(i), `ledger ${i}`);
        t.equal(store.db.counters.get(`c-${i}`), refused ? undefined : i, `counter ${i}`);
      }
    });

    t.test('a rule that refuses after the read keeps the record unchanged', async (t) => {
      await store.db.users.put('usr_1', { id: 'usr_1', username: 'a', role: 'admin', enabled: true, password_hash: 'x', created_at: '2026-01-01T00:00:00.000Z' });
      await t.rejects(updateUser(store, 'usr_1', { role: 'user' }, () => { throw new Error('last admin'); }), /last admin/);
      t.equal(store.db.users.get('usr_1')?.role, 'admin');
    });
  });
}

// A `sync` commit asks lmdb-js to sync after releasing the write lock (MDB_NOSYNC on the
// transaction). That is only safe where the environment runs overlappingSync, which syncs
// such a transaction before the call returns; anywhere else the flag would skip the sync.
t.test('sync commits overlap their flush only where overlappingSync syncs them', async (t) => {
  const store = openStore(tempDir());
  t.teardown(() => store.close());
  t.equal((store.root as { overlappingSync?: boolean }).overlappingSync, true, 'the store runs overlappingSync (lmdb-js default on Linux)');
  t.equal(syncCommitFlags(store.root), 0x10003, 'abortable, synchronous, flush after the lock');
  t.equal(syncCommitFlags({ overlappingSync: false } as unknown as typeof store.root), undefined, 'lmdb-js default flags: synced inside the commit');
});
