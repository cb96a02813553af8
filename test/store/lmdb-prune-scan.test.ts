import t from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { atomically } from '../../src/store/lmdb/atomic.ts';
import { expiryFlag, FAILED_SETTLEMENTS_FLAG } from '../../src/store/lmdb/open.ts';
import { noteExpiry } from '../../src/store/lmdb/expiry.ts';
import { REMOVE_BATCH, SCAN_CHUNK } from '../../src/store/lmdb/prune-scan.ts';
import { markFailedWrites, refund, resolveReservation } from '../../src/store/lmdb/settle.ts';
import type { IdempotencyRecord } from '../../src/store/records.ts';
import { tempDir } from '../helpers/server.ts';
import { countingTurns, recordReads, recordRemovals } from '../helpers/store-reads.ts';
import { reserveInput, tokenRecord } from './contract.ts';

// LMDB's pruners must never read a whole tree inside one write transaction: LMDB has one writer,
// and the metering writer's commits (every verify call's reservation and settlement) wait for
// as long as it is held (bench/prune-lock.ts measures it). Nor may they read a whole tree every
// hour: a day keeps millions of keys, 90 days of results more. What the store contract cannot
// see, checked here on the real store: a pruner finds what expired through the expiry index
// without reading the tree; a store written before the index is read once, in chunks with a turn
// of the event loop between them, and indexed; removals come in writes of at most REMOVE_BATCH,
// each judging its records again. Correctness across batches is in the contract
// (test/store/contract.ts, both stores, records written by real reservations and settlements).

const T = Date.parse('2026-06-01T00:00:00Z');
const HOUR = 3600_000;

/** `n` completed keys with their charged reservations, `at` their completion, written directly,
 * with the expiry entries a settlement writes unless `indexed` is false (as an older build
 * left them). */
async function fill(store: LmdbBackend, n: number, at: number, prefix: string, indexed = true): Promise<void> {
  const s = store.store;
  const { db } = s;
  for (let b = 0; b < n; b += 2000) {
    await db.idempotency.transaction(() => {
      for (let i = b; i < Math.min(n, b + 2000); i++) {
        const iso = new Date(at).toISOString();
        const rec: IdempotencyRecord = { token_id: 'tok_p', key: `${prefix}-${i}`, state: 'completed', fingerprint: 'fp', request_id: `req_${prefix}_${i}`, reservation_id: `res_${prefix}_${i}`, created_at: iso, completed_at: iso, status: 200, body: '{}' };
        void db.idempotency.put(['tok_p', rec.key], rec);
        void db.reservations.put(rec.reservation_id, { id: rec.reservation_id, token_id: 'tok_p', state: 'charged', created_at: iso, settled_at: iso } as never);
        if (!indexed) continue;
        noteExpiry(s, 'idempotency', iso, ['tok_p', rec.key]);
        noteExpiry(s, 'reservations', iso, rec.reservation_id);
      }
    });
  }
}

const entriesOf = (store: LmdbBackend, tree: string) => store.store.db.expiry.getCount({ start: [tree, 0], end: [tree, Number.MAX_SAFE_INTEGER] });

t.test('a prune finds what expired through the expiry index: it reads neither tree, and removes in writes of at most REMOVE_BATCH, each judging again', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const kept = 5 * SCAN_CHUNK + 321;
  const expired = 2 * REMOVE_BATCH + 201;
  await fill(store, expired, T, 'old');
  await fill(store, kept, T + 2 * HOUR, 'new');
  const tree = store.store.db.idempotency;
  const reads = [recordReads(t, tree), recordReads(t, store.store.db.reservations)];
  const removals = await countingTurns(async (turn) => {
    const removals = recordRemovals(t, tree, turn);
    // one old key is completed again, later, while the prune has already read its entry (as a
    // key released, bound again and completed would be, with its own entry): the write that
    // would remove it reads it again and keeps it
    const reread = tree.get.bind(tree);
    let rewritten = false;
    tree.get = ((key: Parameters<typeof reread>[0]) => {
      const k = key as [string, string];
      if (!rewritten && k[1] === 'old-7') {
        rewritten = true;
        const iso = new Date(T + 3 * HOUR).toISOString();
        void tree.put(key, { ...reread(key)!, completed_at: iso });
        noteExpiry(store.store, 'idempotency', iso, key);
      }
      return reread(key);
    }) as typeof tree.get;
    t.teardown(() => void (tree.get = reread));
    t.equal(await store.pruneIdempotency(T + 25 * HOUR, 24), expired - 1, 'every expired key but the one completed again');
    return removals;
  });
  t.same(reads, [[], []], 'neither the keys nor the reservations were read as a range');
  const sizes = [...removals.values()];
  t.ok(sizes.length >= Math.ceil((expired - 1) / REMOVE_BATCH), `removed in ${sizes.length} writes: ${sizes.join(', ')}`);
  t.ok(sizes.every((s) => s <= REMOVE_BATCH), `none of more than ${REMOVE_BATCH}`);
  t.ok(tree.get(['tok_p', 'old-7']), 'the key completed again after the read is kept');
  t.equal(tree.getCount(), kept + 1);
  t.equal(store.store.db.reservations.getCount(), kept, "the reservations settled before the cutoff went too (their own rule: old-7's was settled then)");
  t.equal(entriesOf(store, 'idempotency'), kept + 1, "the expired entries went, old-7's later one stays");
  t.equal(await store.pruneIdempotency(T + 28 * HOUR, 24), kept + 1, 'the rest go at their time, old-7 through its new entry');
  t.equal(tree.getCount(), 0);
  t.equal(await store.pruneIdempotency(T + 28 * HOUR, 24), 0, 'a second pass finds nothing');
});

t.test('a store written before the index: its first prune reads each tree in chunks, with a turn of the event loop between them, and indexes it; the next uses the index', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  const expired = REMOVE_BATCH + 77;
  const kept = 5 * SCAN_CHUNK + 321;
  await fill(store, expired, T, 'old', false);
  await fill(store, kept, T + 2 * HOUR, 'new', false);
  // a pending key, as a call in flight leaves it: never pruned, no entry until it completes
  await s.db.idempotency.put(['tok_p', 'held'], { token_id: 'tok_p', key: 'held', state: 'pending', fingerprint: 'fp', request_id: 'req_h', reservation_id: 'res_h', created_at: new Date(T).toISOString(), completed_at: null, status: null, body: null });
  await atomically(s, () => {
    for (const tree of ['idempotency', 'reservations'] as const) void s.db.meta.remove(expiryFlag(tree));
  });
  let reads: number[] = [];
  await countingTurns(async (turn) => {
    reads = recordReads(t, s.db.idempotency, turn);
    t.equal(await store.pruneIdempotency(T + 25 * HOUR, 24), expired, 'the expired keys went');
  });
  const total = expired + kept + 1;
  t.equal(reads.length, Math.ceil(total / SCAN_CHUNK), `the tree of ${total} keys was read in chunks of ${SCAN_CHUNK}`);
  t.ok(reads.every((at, i) => i === 0 || at > reads[i - 1]!), `the event loop turned between every two chunks (at turns ${reads.join(', ')})`);
  t.equal(s.db.reservations.getCount(), kept + 0, 'the reservations settled before the cutoff went too');
  t.same([s.db.meta.get(expiryFlag('idempotency')), s.db.meta.get(expiryFlag('reservations'))], [true, true], 'both trees marked indexed');
  t.same([entriesOf(store, 'idempotency'), entriesOf(store, 'reservations')], [kept, kept], 'each kept record with a time has its entry, the pending key none');

  const later = recordReads(t, s.db.idempotency);
  t.equal(await store.pruneIdempotency(T + 27 * HOUR, 24), kept, 'the next prune removes the rest at their time');
  t.same(later, [], 'through the index, without reading the tree');
  t.ok(s.db.idempotency.get(['tok_p', 'held']), 'the pending key stays');
  t.equal(s.db.reservations.getCount(), 0);
});

t.test('results and device sessions: an older store is indexed by its first prune, then pruned through the index', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  const n = SCAN_CHUNK + 10;
  await s.db.results.transaction(() => {
    for (let i = 0; i < n; i++) void s.db.results.put(`req_${i}`, { at: new Date(T + (i % 2) * 10 * HOUR).toISOString(), token_id: 'tok_p', module_id: 'rgb_liveness', results: [] });
    for (let i = 0; i < 4; i++) {
      const id = `ds_${i}`;
      void s.db.deviceSessions.put(['id', id], { id, token_id: 'tok_p', hash: `h${i}`, created_at: new Date(T).toISOString(), expires_at: new Date(T + (i % 2) * 10 * HOUR).toISOString() } as never);
      void s.db.deviceSessions.put(['hash', `h${i}`], id);
      void s.db.deviceSessions.put(['tok', 'tok_p', T, id], id);
    }
    for (const tree of ['results', 'deviceSessions'] as const) void s.db.meta.remove(expiryFlag(tree));
  });
  t.equal(await store.pruneResultsBefore(T + HOUR), Math.ceil(n / 2), 'the older half of the results');
  t.equal(await store.pruneDeviceSessionsBefore(T + HOUR), 2, 'two sessions expired');
  t.same([s.db.meta.get(expiryFlag('results')), s.db.meta.get(expiryFlag('deviceSessions'))], [true, true]);
  t.same([entriesOf(store, 'results'), entriesOf(store, 'deviceSessions')], [Math.floor(n / 2), 2], "the kept ones' entries; the sessions' other keys have none");
  const reads = [recordReads(t, s.db.results), recordReads(t, s.db.deviceSessions)];
  t.equal(await store.pruneResultsBefore(T + 11 * HOUR), Math.floor(n / 2));
  t.equal(await store.pruneDeviceSessionsBefore(T + 11 * HOUR), 2);
  t.same(reads, [[], []], 'the second prune read neither tree as a range');
  t.same([s.db.results.getCount(), s.db.deviceSessions.getCount()], [0, 0], 'the sessions went with their hash and token keys');
});

t.test('db migrate has the next prune index again what an older build wrote without entries', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  await fill(store, 3, T, 'indexed');
  await fill(store, 2, T, 'older-build', false); // a roll-back's writes: no entries, the flags still set
  t.same(await store.forgetExpiryIndex(), ['idempotency', 'reservations', 'results', 'deviceSessions']);
  t.equal(await store.pruneIdempotency(T + 25 * HOUR, 24), 5, 'the records the older build wrote went too');
  t.equal(store.store.db.meta.get(expiryFlag('idempotency')), true, 'indexed again');
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

t.test('a start finds the pending reservations through their index; a store another build wrote is read whole once and both indexes rebuilt', async (t) => {
  // a build older than the indexes writes reservations without them (a roll-back, then this
  // build again): its pending ones must still be refunded, its failed ones listed
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  const s = store.store;
  const settledIso = new Date(T).toISOString();
  // a day's settled reservations (written directly: this build's, without their expiry entries)
  const settledOnes = (n: number, at: number) =>
    s.db.reservations.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = `res_${at}_${String(i).padStart(6, '0')}`;
        void s.db.reservations.put(id, { id, token_id: 'tok_p', state: 'charged', created_at: settledIso, settled_at: settledIso, unsaved_body: null } as never);
      }
    });
  await settledOnes(2 * SCAN_CHUNK + 600, 1);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
  await store.insertToken(tok);
  const reserveOne = async () => {
    const out = await store.reserve(reserveInput(tok, { at: T }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    return out.reservation;
  };
  const tree = s.db.reservations;
  let reads = recordReads(t, tree);
  t.same(await store.recoverPending(T + 1000), [], 'a start: nothing pending');
  t.equal(reads.length, 0, 'and none of the settled reservations read');

  // this build's reservations, left pending by a process that died (this pid: a previous run)
  const lost = [await reserveOne(), await reserveOne()];
  reads = recordReads(t, tree);
  t.same((await store.recoverPending(T + 2000)).map((r) => r.id).sort(), lost.map((r) => r.id).sort(), 'a start refunds what a dead process left pending');
  t.equal(reads.length, 0, 'found through the index, without reading the reservations');
  t.same([...s.db.pendingReservations.getKeys({})], [], 'and no longer indexed as pending');

  // a prune between starts changes nothing of this
  await store.pruneIdempotency(T + 26 * HOUR, 24);
  t.equal(tree.getCount(), 2 * SCAN_CHUNK + 600, 'the refunded two were pruned (the ones written directly have no expiry entries)');
  const afterPrune = reads.length; // getCount is a range read of its own
  t.same(await store.recoverPending(T + 26 * HOUR), []);
  t.equal(reads.length, afterPrune, 'a start after the prune reads no reservation either');

  // another build writes: a pending reservation of a dead process, and a failed settlement,
  // neither indexed; and a stray entry in each index
  const made = [await reserveOne(), await reserveOne()];
  await tree.transaction(() => {
    for (const r of made) void tree.remove(r.id);
    void s.db.pendingReservations.remove(made[0]!.id);
    void s.db.ledger.remove([...s.db.ledger.getKeys({ reverse: true, limit: 2 })][0]!);
    void s.db.ledger.remove([...s.db.ledger.getKeys({ reverse: true, limit: 2 })][1]!);
  });
  // the other build's writes of those two calls: its reservations (no index entry), and the
  // ledger charges every reservation appends, without this build's high mark
  const orphan = { ...made[0]!, id: `${made[0]!.id}x` };
  const failedElsewhere = { ...made[1]!, id: `${made[1]!.id}x`, state: 'settlement_failed' as const, unsaved_body: '{}' };
  await tree.transaction(() => {
    for (const r of [orphan, failedElsewhere]) {
      void tree.put(r.id, r);
      void s.db.ledger.put([T + 27 * HOUR, `led_${r.id}`], { id: `led_${r.id}`, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, kind: 'charge', at: new Date(T + 27 * HOUR).toISOString(), windows: r.windows });
    }
    void s.db.pendingReservations.put('res_gone', 1);
    void s.db.failedSettlements.put('res_gone', 1);
  });
  t.same(await store.listSettlementFailed(), [], 'before: the failed one is not listed');
  t.same((await store.recoverPending(T + 28 * HOUR)).map((r) => r.id), [orphan.id], "the other build's pending reservation is refunded");
  t.ok(reads.length > afterPrune, 'by a read of every reservation');
  t.same((await store.listSettlementFailed()).map((r) => r.id), [failedElsewhere.id], 'its failed settlement is listed');
  t.same([[...s.db.pendingReservations.getKeys({})], [...s.db.failedSettlements.getKeys({})]], [[], [failedElsewhere.id]], 'the stray entries are gone');
  t.equal(s.db.meta.get(expiryFlag('results')), undefined, "and the next prune indexes each tree again, for what the other build's calls left");
  const before = reads.length;
  t.same(await store.recoverPending(T + 29 * HOUR), []);
  t.equal(reads.length, before, 'the next start reads the index again (the refund above appended to the ledger as this build)');
});
