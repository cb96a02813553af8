import t, { type Test } from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { atomically } from '../../src/store/lmdb/atomic.ts';
import { FAILED_SETTLEMENTS_FLAG } from '../../src/store/lmdb/open.ts';
import { REMOVE_BATCH, SCAN_CHUNK } from '../../src/store/lmdb/prune-scan.ts';
import { markFailedWrites, refund, resolveReservation } from '../../src/store/lmdb/settle.ts';
import type { IdempotencyRecord } from '../../src/store/records.ts';
import { tempDir } from '../helpers/server.ts';
import { reserveInput, tokenRecord } from './contract.ts';

// LMDB's pruners must never read a whole tree inside one write transaction: LMDB has one writer,
// and the metering writer's commits (every verify call's reservation and settlement) wait for
// as long as it is held (bench/prune-lock.ts measures it). What the store contract cannot see,
// checked here on the real store: a large tree is read in chunks with a turn of the event loop
// between them (a write transaction's callback never gives the loop a turn), and the removals
// come in writes of at most REMOVE_BATCH. Correctness across batches is in the contract
// (test/store/contract.ts, both stores).

const T = Date.parse('2026-06-01T00:00:00Z');
const HOUR = 3600_000;

/** `n` completed keys with their charged reservations, `at` their completion, written directly. */
async function fill(store: LmdbBackend, n: number, at: number, prefix: string): Promise<void> {
  const { db } = store.store;
  for (let b = 0; b < n; b += 2000) {
    await db.idempotency.transaction(() => {
      for (let i = b; i < Math.min(n, b + 2000); i++) {
        const iso = new Date(at).toISOString();
        const rec: IdempotencyRecord = { token_id: 'tok_p', key: `${prefix}-${i}`, state: 'completed', fingerprint: 'fp', request_id: `req_${prefix}_${i}`, reservation_id: `res_${prefix}_${i}`, created_at: iso, completed_at: iso, status: 200, body: '{}' };
        void db.idempotency.put(['tok_p', rec.key], rec);
        void db.reservations.put(rec.reservation_id, { id: rec.reservation_id, token_id: 'tok_p', state: 'charged', created_at: iso, settled_at: iso } as never);
      }
    });
  }
}

/** The event loop's turns, counted while `body` runs. */
async function countingTurns<T>(body: (turn: () => number) => Promise<T>): Promise<T> {
  let turns = 0;
  let on = true;
  const tick = () => {
    turns++;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return await body(() => turns);
  } finally {
    on = false;
  }
}

/** Records, for each range read of `tree` from now until the test ends, the value of `at()`
 * when it was made (the event loop's turn, or 0 to count only). */
function recordReads(t: Test, tree: { getRange: (...args: never[]) => unknown }, at: () => number = () => 0): number[] {
  const reads: number[] = [];
  const getRange = tree.getRange.bind(tree);
  tree.getRange = ((...args: never[]) => {
    reads.push(at());
    return getRange(...args);
  }) as typeof tree.getRange;
  t.teardown(() => void (tree.getRange = getRange));
  return reads;
}

t.test('a prune reads a large tree in chunks, with a turn of the event loop between them', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const n = 5 * SCAN_CHUNK + 321;
  await fill(store, n, T, 'kept'); // completed within the retention: nothing to remove
  const tree = store.store.db.idempotency;
  let reads: number[] = [];
  await countingTurns(async (turn) => {
    reads = recordReads(t, tree, turn);
    t.equal(await store.pruneIdempotency(T + 2 * HOUR, 24), 0, 'nothing expired');
  });
  t.equal(reads.length, Math.ceil(n / SCAN_CHUNK), `the tree of ${n} keys was read in chunks of ${SCAN_CHUNK}`);
  t.ok(reads.every((at, i) => i === 0 || at > reads[i - 1]!), `the event loop turned between every two chunks (at turns ${reads.join(', ')})`);
  t.equal(store.store.db.idempotency.getCount(), n, 'every key kept');
});

t.test(`what a prune removes goes in writes of at most ${REMOVE_BATCH}, each judged again inside the write`, async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const expired = 2 * REMOVE_BATCH + 201;
  await fill(store, expired, T, 'old');
  await fill(store, 700, T + 2 * HOUR, 'new');
  const tree = store.store.db.idempotency;
  const removals = new Map<number, number>(); // event-loop turn -> keys removed in it
  await countingTurns(async (turn) => {
    const remove = tree.remove.bind(tree);
    tree.remove = ((key: Parameters<typeof remove>[0]) => {
      removals.set(turn(), (removals.get(turn()) ?? 0) + 1);
      return remove(key);
    }) as typeof tree.remove;
    t.teardown(() => void (tree.remove = remove));
    // one old key is written again, completed later, while the prune has already read it: the
    // write that removes it reads it again and keeps it
    const reread = tree.get.bind(tree);
    let rewritten = false;
    tree.get = ((key: Parameters<typeof reread>[0]) => {
      const k = key as [string, string];
      if (!rewritten && k[1] === 'old-7') {
        rewritten = true;
        const rec = reread(key)!;
        void tree.put(key, { ...rec, completed_at: new Date(T + 3 * HOUR).toISOString() });
      }
      return reread(key);
    }) as typeof tree.get;
    t.teardown(() => void (tree.get = reread));
    t.equal(await store.pruneIdempotency(T + 25 * HOUR, 24), expired - 1, 'every expired key but the one completed again');
  });
  const sizes = [...removals.values()];
  t.ok(sizes.length >= Math.ceil((expired - 1) / REMOVE_BATCH), `removed in ${sizes.length} writes: ${sizes.join(', ')}`);
  t.ok(sizes.every((s) => s <= REMOVE_BATCH), `none of more than ${REMOVE_BATCH}`);
  t.ok(tree.get(['tok_p', 'old-7']), 'the key completed again after the read is kept');
  t.equal(tree.getCount(), 700 + 1);
  t.equal(store.store.db.reservations.getCount(), 700, 'the reservations settled before the cutoff went too (their own rule: old-7\'s was settled then)');
});

t.test("the operator's settlements list reads an index of the failed settlements, kept in step with each change of state", async (t) => {
  // it runs in an API worker (the console's overview, GET /admin/api/settlements), and the
  // reservations are kept as long as their keys: reading them all to find the few failed ones
  // held that worker's calls (1.2 s for 531,000)
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  // many settled reservations, as a day's calls leave them, and three real ones that fail
  await s.db.reservations.transaction(() => {
    for (let i = 0; i < 2 * SCAN_CHUNK + 600; i++) {
      const id = `res_${String(i).padStart(6, '0')}`;
      void s.db.reservations.put(id, { id, token_id: 'tok_p', state: 'charged', created_at: new Date(T).toISOString(), settled_at: new Date(T).toISOString(), unsaved_body: null } as never);
    }
  });
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
  await store.insertToken(tok);
  const failed: string[] = [];
  for (const late of [3000, 1000, 2000]) {
    const out = await store.reserve(reserveInput(tok, { at: T + late }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    failed.push(out.reservation.id);
  }
  // marked as a settlement that could not be written marks them
  await atomically(s, () => {
    for (const id of failed) markFailedWrites(s, id, '{}');
  });
  const ids = { oldest: failed[1]!, middle: failed[2]!, newest: failed[0]! };
  const tree = s.db.reservations;
  const reads = recordReads(t, tree);
  t.same((await store.listSettlementFailed()).map((r) => r.id), [ids.oldest, ids.middle, ids.newest], 'every failed settlement, oldest first');
  t.equal(reads.length, 0, 'found without reading the reservations');

  // out of the list when an operator resolves it, and when it is refunded
  t.match(await resolveReservation(s, ids.oldest, 'charge', T + 5000), { state: 'charged' });
  t.match(await refund(s, ids.newest, T + 6000), { state: 'refunded' });
  t.same((await store.listSettlementFailed()).map((r) => r.id), [ids.middle], 'a resolved and a refunded one are no longer listed');
  t.same([...s.db.failedSettlements.getKeys({})], [ids.middle], 'the index holds only what is still failed');
});

t.test('a store written before the index gets it built once, by a read in chunks, then uses it', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  const n = 2 * SCAN_CHUNK + 600;
  // as an older build left it: failed reservations, no index, no flag
  await s.db.reservations.transaction(() => {
    for (let i = 0; i < n; i++) {
      const id = `res_${String(i).padStart(6, '0')}`;
      const failed = i % 1000 === 7;
      void s.db.reservations.put(id, { id, token_id: 'tok_p', state: failed ? 'settlement_failed' : 'charged', created_at: new Date(T + i).toISOString(), settled_at: null, unsaved_body: failed ? '{}' : null } as never);
    }
    void s.db.meta.remove(FAILED_SETTLEMENTS_FLAG);
  });
  const tree = s.db.reservations;
  let reads: number[] = [];
  const list = await countingTurns(async (turn) => {
    reads = recordReads(t, tree, turn);
    const first = await store.listSettlementFailed();
    t.equal(reads.length, Math.ceil(n / SCAN_CHUNK), `built from a read in chunks of ${SCAN_CHUNK}`);
    t.ok(reads.every((at, i) => i === 0 || at > reads[i - 1]!), `the event loop turned between chunks (at turns ${reads.join(', ')})`);
    t.equal(s.db.meta.get(FAILED_SETTLEMENTS_FLAG), true, 'and marked complete');
    const again = await store.listSettlementFailed();
    t.equal(reads.length, Math.ceil(n / SCAN_CHUNK), 'the next list reads the index only');
    t.same(again, first);
    return first;
  });
  t.same(list.map((r) => r.id), ['res_000007', 'res_001007', 'res_002007']);
});

t.test('every start checks the index against its read of the reservations: a failure marked without the index is listed again', async (t) => {
  // a build from before the index, run on a store that had it (a downgrade, then this build
  // again), marks failures without indexing them, and the flag says the index is complete
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
  await store.insertToken(tok);
  const reserveOne = async () => {
    const out = await store.reserve(reserveInput(tok, { at: T }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    return out.reservation;
  };
  const unindexed = await reserveOne();
  const indexed = await reserveOne();
  await s.db.reservations.put(unindexed.id, { ...unindexed, state: 'settlement_failed', unsaved_body: '{}' }); // as the older build's mark
  await atomically(s, () => markFailedWrites(s, indexed.id, '{}'));
  await s.db.failedSettlements.put('res_gone', 1); // an entry whose reservation is not failed
  t.same((await store.listSettlementFailed()).map((r) => r.id), [indexed.id], 'before: only the indexed one');
  t.same(await store.recoverPending(T + 1000), [], 'none pending: nothing refunded');
  t.same((await store.listSettlementFailed()).map((r) => r.id).sort(), [indexed.id, unindexed.id].sort(), 'after the start-up read: both');
  t.same([...s.db.failedSettlements.getKeys({})].sort(), [indexed.id, unindexed.id].sort(), 'and the stray entry is gone');
});
