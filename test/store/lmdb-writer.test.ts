// The process's LMDB metering writer (src/store/lmdb/writer.ts): the API workers' reservations,
// settlements and refunds committed by one thread, many calls to one commit and one sync; a
// settlement (refund, mark) answered only once its commit is on disk, a reservation as soon as
// its writes have run, its batch held open for a write that needs the sync. Driven in
// process: a real writer thread and real channels, the test's stores standing for API workers
// (the server tests run it for real: every LMDB server of the suite with LMDB_COMMITS=sync
// commits through it).

import fs from 'node:fs';
import path from 'node:path';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import t, { type Test } from 'tap';
import { LmdbBackend, settle } from '../../src/store/lmdb/index.ts';
import { reserveWrites } from '../../src/store/lmdb/reserve.ts';
import { settleWrites } from '../../src/store/lmdb/settle.ts';
import { meteringWriterOf, type MeteringWriter } from '../../src/store/lmdb/writer.ts';
import { SETTLE_HOLD, settleHoldMs, WriterClient, type SettleHold, type WriterReply, type WriterRequest } from '../../src/store/lmdb/writer-client.ts';
import type { AuditRecord, Reservation } from '../../src/store/records.ts';
import { waitFor } from '../helpers/wait.ts';
import { ROOT, tempDir } from '../helpers/server.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';

/** A hold no test reaches: only a write that needs the sync ends a batch of reservations. */
const HOLD_LONG_MS = 120_000;

const commitsOf = (s: LmdbBackend) => (s.store.root.getStats() as { lastTxnId: number }).lastTxnId;

/** A writer on a new store, and `n` stores on it standing for API workers, each with a
 * channel of its own. `holdMs`: how long the writer holds a batch of answered reservations
 * open for company (the service's RESERVATION_HOLD_MS unless given; a test that must see a
 * reservation answered before its commit for certain gives it minutes). */
async function writerWith(t: Test, n: number, dir = tempDir(), holdMs?: number, settleHold?: SettleHold) {
  const storeDir = path.join(dir, 'store');
  // the store exists before the writer opens it (as the main thread's does in the service)
  const main = LmdbBackend.open(dir);
  // started by the main thread's store, as Cluster.spawn does; its close ends the writer
  const writer = meteringWriterOf(main.store, holdMs, settleHold)!;
  const workers = Array.from({ length: n }, () => LmdbBackend.open(dir, { writer: new WriterClient(writer.connect()!.port), auditDelayMs: 600_000 }));
  t.teardown(async () => {
    for (const w of workers) await w.close();
    await main.close();
  });
  return { dir, storeDir, main, writer, workers };
}

/** The meta LMDB writes once a commit is flushed (mdb.c: mdb_env_sync and the `done:` branch
 * of mdb_txn_commit write it at half a page, from mm_mapsize on, marked flushed), read from
 * the file: its txnid and whether it is marked flushed (MDB_OVERLAPPINGSYNC, 0x1000, clear in
 * the free DB's flags). A commit's own meta (pages 0 and 1) is written before its sync,
 * marked not flushed. */
function flushedMeta(storeDir: string): { txnid: number; flushed: boolean } {
  const fd = fs.openSync(path.join(storeDir, 'data.mdb'), 'r');
  try {
    const page = Buffer.alloc(16384);
    fs.readSync(fd, page, 0, page.length, 0);
    // lmdb-js's page header (24 bytes), then MDB_meta: magic, version, address, mapsize,
    // dbs[0] (md_pad = the page size, md_flags, ...), dbs[1], last_pg, txnid
    const HEADER = 24;
    if (page.readUInt32LE(HEADER) !== 0xbeefc0de) throw new Error('not an LMDB data file');
    const at = page.readUInt32LE(HEADER + 24) / 2 + HEADER;
    return { txnid: Number(page.readBigUInt64LE(at + 128)), flushed: (page.readUInt16LE(at + 28) & 0x1000) === 0 };
  } finally {
    fs.closeSync(fd);
  }
}

const auditLine = (requestId: string): AuditRecord => ({
  request_id: requestId, at: new Date(T0).toISOString(), token_id: null, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null,
  status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 1.5, outcome: 'live', replayed: false,
});

t.test('a call through the writer: reserved, settled, replayed, refunded, as on its own thread', async (t) => {
  const { workers: [w] } = await writerWith(t, 1);
  const s = w!;
  t.ok(s.store.writer?.alive, 'the store has the writer');
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 2, period: 'never' }]);
  await s.insertToken(tok);
  const input = reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'f-1' });
  const out = await s.reserve(input);
  if (out.kind !== 'reserved') throw new Error(out.kind);
  t.equal(out.reservation.thread, 0, 'the reservation names the asking thread, not the writer');
  const settled = await s.settle(out.reservation, T0 + 1, (usage) => JSON.stringify({ usage }), [{ v: 1 }]);
  t.same(settled, { kind: 'settled', body: JSON.stringify({ usage: await s.usageSnapshot(tok, T0 + 1) }) }, 'the answer shows the usage as of settlement');
  t.match(settled.kind === 'settled' ? settled.body : '', /"used":1/);
  t.same(await s.reserve({ ...input, requestId: 'req_again' }), { kind: 'replay', status: 200, body: settled.kind === 'settled' ? settled.body : '' }, 'the key replays the saved answer');
  t.same(await s.getResults(out.reservation.request_id).then((r) => r?.results), [{ v: 1 }]);
  const twice = await s.settle(out.reservation, T0 + 2, () => '{}', []);
  t.equal(twice.kind, 'settlement_failed', 'a settled reservation does not settle twice (refused before any write; the writer lives on)');

  const other = await s.reserve(reserveInput(tok));
  if (other.kind !== 'reserved') throw new Error(other.kind);
  t.same(await s.reserve(reserveInput(tok)).then((r) => r.kind), 'quota_exceeded', 'two units, both held');
  const back = await s.refund(other.reservation.id, T0 + 3);
  t.equal(back?.state, 'refunded');
  t.same((await s.usageSnapshot(tok, T0)).map((u) => u.used), [1]);
  t.same((await s.verifyLedger()).ok, true, 'the counters equal the ledger');
});

t.test('the calls of several API workers share commits: reservations answered before their commit, settlements only once it is flushed', async (t) => {
  // held for minutes: only a settlement can end the reservations' batch
  const { storeDir, main, workers } = await writerWith(t, 4, tempDir(), HOLD_LONG_MS);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 30, period: 'never' }]);
  await main.insertToken(tok);
  const before = commitsOf(main);
  const flushedBefore = flushedMeta(storeDir);
  // 4 workers, 5 reservations each, asked at once: a race for 30 units, none refused
  const outs = await Promise.all(workers.flatMap((w) => [1, 2, 3, 4, 5].map(() => w.reserve(reserveInput(tok)))));
  t.same(outs.map((o) => o.kind), Array(20).fill('reserved'));
  // answered, and not committed: no commit since, nothing of them visible, the flushed meta
  // where it was
  t.equal(commitsOf(main), before, 'the 20 reservations were answered before any commit');
  main.store.root.resetReadTxn();
  t.same(outs.filter((o) => o.kind === 'reserved' && main.store.db.reservations.get(o.reservation.id) !== undefined), [], 'none is visible to another thread yet');
  t.same(flushedMeta(storeDir), flushedBefore);

  const settled = await Promise.all(outs.map((o, i) => (o.kind === 'reserved' ? workers[i % 4]!.settle(o.reservation, T0 + 1, () => `{"n":${i}}`, []) : Promise.resolve(null))));
  t.same(settled.map((s) => s?.kind), Array(20).fill('settled'));
  const commits = commitsOf(main) - before;
  t.ok(commits < 20, `20 reservations and 20 settlements of 4 workers in ${commits} commit(s), the reservations in the first settlement's`);
  t.comment(`20 reservations and 20 settlements, ${commits} commit(s)`);
  // the answers left after the sync: the flushed meta already names the last commit
  const after = flushedMeta(storeDir);
  t.ok(after.flushed && after.txnid >= commitsOf(main), `the settlements were answered after their sync (flushed meta at txn ${after.txnid}, last commit ${commitsOf(main)})`);
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [20], 'a race for the units never over-admits');
  t.same((await main.verifyLedger()).ok, true);
});

t.test('a lone call: its reservation answered before its commit, then committed with its settlement, in one commit and one sync', async (t) => {
  const { storeDir, main, workers: [w] } = await writerWith(t, 1, tempDir(), HOLD_LONG_MS);
  const s = w!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 3, period: 'day' }, { module_id: 'color_liveness', limit: 2, period: 'never' }]);
  await main.insertToken(tok);
  const before = commitsOf(main);
  const out = await s.reserve(reserveInput(tok, { idempotencyKey: 'k-lone', fingerprint: 'f' }));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  main.store.root.resetReadTxn();
  t.equal(main.store.db.reservations.get(out.reservation.id), undefined, 'answered, not committed');
  t.equal(commitsOf(main), before);
  // the answer is rendered on the worker, before its reservation is visible there: its own
  // units are counted as the commit counts them, and no other module's
  const settled = await s.settle(out.reservation, T0 + 1, (usage) => JSON.stringify({ usage }), [{ v: 1 }]);
  if (settled.kind !== 'settled') throw new Error(settled.kind);
  t.same(JSON.parse(settled.body).usage, await main.usageSnapshot(tok, T0 + 1), 'the answer shows the usage as committed');
  t.same(JSON.parse(settled.body).usage.map((u: { used: number; remaining: number }) => [u.used, u.remaining]), [[1, 2], [0, 2]]);
  t.equal(commitsOf(main) - before, 1, 'one commit for the reservation and its settlement');
  const meta = flushedMeta(storeDir);
  t.ok(meta.flushed && meta.txnid >= commitsOf(main), 'answered once that commit was flushed');
  t.same(await s.reserve(reserveInput(tok, { idempotencyKey: 'k-lone', fingerprint: 'f' })), { kind: 'replay', status: 200, body: settled.body }, 'the key replays');
});

/** A settlement hold no test reaches: once the writer has timed one call from its reservation's
 * answer to its settlement, a batch with a settlement stays open while any answered
 * reservation is unsettled; nothing is stale. */
const SETTLE_HOLD_LONG: SettleHold = { share: 1e9, maxMs: HOLD_LONG_MS, staleMs: HOLD_LONG_MS };

t.test('settlements wait in their open batch for those of the reservations outstanding, and share its sync; with none outstanding, a settlement commits at once', async (t) => {
  const { storeDir, main, workers: [w, v] } = await writerWith(t, 2, tempDir(), HOLD_LONG_MS, SETTLE_HOLD_LONG);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await main.insertToken(tok);
  // a lone call: nothing outstanding once it settles, so its batch commits at once (a writer
  // that held it would hold it for minutes); it also times the writer's first answer-to-settle
  let before = commitsOf(main);
  const lone = await w!.reserve(reserveInput(tok));
  if (lone.kind !== 'reserved') throw new Error(lone.kind);
  t.equal((await w!.settle(lone.reservation, T0 + 1, () => '{}', [])).kind, 'settled', 'a lone settlement is answered');
  t.equal(commitsOf(main) - before, 1, 'in one commit with its reservation');

  before = commitsOf(main);
  const [a, b] = await Promise.all([w!.reserve(reserveInput(tok)), v!.reserve(reserveInput(tok))]);
  if (a?.kind !== 'reserved' || b?.kind !== 'reserved') throw new Error('not reserved');
  let aAnswered = false;
  const aSettled = w!.settle(a.reservation, T0 + 2, () => '{"a":1}', []).then((r) => {
    aAnswered = true;
    return r;
  });
  // posted after A's settlement on the same channel, so the writer runs it after A's: answered
  // at once, from the batch that holds A's settlement while B is outstanding (a writer that had
  // committed A's batch would have answered A first, on this same port)
  const c = await w!.reserve(reserveInput(tok));
  if (c.kind !== 'reserved') throw new Error(c.kind);
  t.notOk(aAnswered, 'the settlement is held while another call\'s reservation is unsettled; a reservation reaching its batch is answered at once');
  const [bOut, cOut] = await Promise.all([v!.settle(b.reservation, T0 + 3, () => '{"b":1}', []), w!.refund(c.reservation.id, T0 + 3)]);
  t.same([(await aSettled).kind, bOut.kind, cOut?.state], ['settled', 'settled', 'refunded'], 'once nothing is outstanding, all are answered');
  t.equal(commitsOf(main) - before, 1, 'three reservations, two settlements and a refund of two workers in one commit and one sync');
  const meta = flushedMeta(storeDir);
  t.ok(meta.flushed && meta.txnid >= commitsOf(main), 'answered once that commit was flushed');
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [3]);
  t.same((await main.verifyLedger()).ok, true, 'the counters equal the ledger');
});

// The writer runs a request's checks apart from its writes, with no child transaction
// (writer-thread.ts runOne): a throw in the checks fails that request alone, and the batch it is
// in commits the others.
t.test('a settlement refused in its checks fails alone: the other settlement in its batch is charged, in the same commit', async (t) => {
  const { main, workers: [w, v] } = await writerWith(t, 2, tempDir(), HOLD_LONG_MS, SETTLE_HOLD_LONG);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await main.insertToken(tok);
  // a lone call first: it times the writer's answer-to-settle, so that the hold below starts
  const lone = await w!.reserve(reserveInput(tok));
  if (lone.kind !== 'reserved') throw new Error(lone.kind);
  t.equal((await w!.settle(lone.reservation, T0 + 1, () => '{}', [])).kind, 'settled');
  const before = commitsOf(main);
  const [a, b] = await Promise.all([w!.reserve(reserveInput(tok)), v!.reserve(reserveInput(tok))]);
  if (a?.kind !== 'reserved' || b?.kind !== 'reserved') throw new Error('not reserved');
  // A's settlement is refused in its checks (the test fault) and its batch is held while B is
  // outstanding, so B's settlement joins that batch
  const aOut = settle(w!.store, a.reservation, T0 + 2, () => '{"a":1}', [], 'fail');
  const bOut = await v!.settle(b.reservation, T0 + 3, () => '{"b":1}', []);
  t.equal(bOut.kind, 'settled', 'the other settlement is charged');
  t.equal((await aOut).kind, 'settlement_failed', 'the refused one is marked for an operator');
  t.equal(commitsOf(main) - before, 2, 'one commit for both reservations, the refusal and the settlement; one for the mark');
  t.same((await main.listSettlementFailed()).map((r) => r.id), [a.reservation.id]);
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [3], 'the lone call and B charged, A held for the operator');
  t.same((await main.verifyLedger()).ok, true, 'the counters equal the ledger');
});

// The hold's length and its Little's-law start (settleHoldMs), as arithmetic: the writer's own
// hold is driven above with a share that always starts it, since where the service's share
// gives no hold, a writer holding anyway would hold 15 % of a few ms, which no test can tell
// from none without timing it.
t.test('the settlements\' hold: 15 % of the answer-to-settlement time, 12 ms at most, and only where Little\'s law expects a settlement within it', async (t) => {
  const near = (got: number, want: number, what: string) => t.ok(Math.abs(got - want) < 1e-9, `${what}: ${got} ms, ${want} wanted`);
  t.equal(settleHoldMs(SETTLE_HOLD, 0, 10), 0, 'none before the first answer-to-settlement is measured');
  t.equal(settleHoldMs(SETTLE_HOLD, 5, 0), 0, 'none while nothing is outstanding');
  t.equal(settleHoldMs(SETTLE_HOLD, 5, 3), 0, '2 API workers / concurrency 4 (three others outstanding at most): 0.45 expected, no hold');
  t.equal(settleHoldMs(SETTLE_HOLD, 5, 6), 0, 'six outstanding: 0.9 expected, no hold');
  near(settleHoldMs(SETTLE_HOLD, 5, 7), 0.75, 'seven outstanding at 5 ms: 1.05 expected, 15 % of 5 ms');
  t.equal(settleHoldMs(SETTLE_HOLD, 100, 8), 0, 'at 100 ms the 12 ms cap binds: eight outstanding expect 0.96, no hold');
  t.equal(settleHoldMs(SETTLE_HOLD, 100, 9), 12, 'nine outstanding at 100 ms: 1.08 expected, 12 ms');
  t.equal(settleHoldMs(SETTLE_HOLD, 90, 31), 12, '16 API workers / concurrency 32 (70-100 ms answer-to-settlement): 12 ms');
  t.equal(settleHoldMs({ ...SETTLE_HOLD, share: 0 }, 90, 31), 0, 'a share of 0 turns it off');
});

t.test('a batch whose commit fails after its reservations were answered: nothing charged, every key free, the calls answered store_unavailable', async (t) => {
  const { main, workers: [w, v] } = await writerWith(t, 2, tempDir(), HOLD_LONG_MS);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  // one call settled before, to show the failure takes nothing committed
  const first = await w!.reserve(reserveInput(tok, { idempotencyKey: 'k-0', fingerprint: 'f' }));
  if (first.kind !== 'reserved') throw new Error(first.kind);
  const firstBody = await w!.settle(first.reservation, T0 + 1, () => '{"first":1}', []);
  t.equal(firstBody.kind, 'settled');
  const c0 = commitsOf(main);
  // three calls of two workers reserved in one held batch, all answered
  const outs = await Promise.all([w!.reserve(reserveInput(tok, { idempotencyKey: 'k-a', fingerprint: 'f' })), v!.reserve(reserveInput(tok, { idempotencyKey: 'k-b', fingerprint: 'f' })), v!.reserve(reserveInput(tok, { idempotencyKey: 'k-c', fingerprint: 'f' }))]);
  const [a, b, c] = outs.map((o) => {
    if (o.kind !== 'reserved') throw new Error(o.kind);
    return o.reservation;
  });
  // a's settlement joins the batch and its commit fails (the test fault: ENOSPC from inside the
  // batch's transaction, thrown after the settlement's writes, which ends it as a commit that
  // cannot be written does: none of those writes may be committed)
  const failed = await settle(w!.store, a!, T0 + 2, () => '{"a":1}', [], 'fail-commit');
  t.match(failed, { kind: 'not_recorded', refund: 'refunded' }, 'the settlement in the failed batch: not recorded, nothing held (503 store_unavailable)');
  t.equal(commitsOf(main), c0, 'nothing was committed');
  // b settles later, c's inference fails: both hear that their reservation is gone
  t.match(await v!.settle(b!, T0 + 3, () => '{"b":1}', []), { kind: 'not_recorded', refund: 'refunded' }, 'a later settlement of a lost reservation: not recorded, nothing charged');
  t.equal(await v!.refund(c!.id, T0 + 3), undefined, 'the refund of a lost reservation: nothing to give back');
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [1], 'only the call settled before is charged');
  t.same(await main.listSettlementFailed(), [], 'nothing for an operator');
  main.store.root.resetReadTxn();
  t.same([a, b, c].map((r) => main.store.db.reservations.get(r!.id)), [undefined, undefined, undefined], 'no trace of the three reservations');
  const retries: Reservation[] = [];
  for (const key of ['k-a', 'k-b', 'k-c']) {
    const retry = await v!.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'f' }));
    t.equal(retry.kind, 'reserved', `${key} is free: its retry reserves afresh`);
    if (retry.kind === 'reserved') retries.push(retry.reservation);
  }
  // (a replay waits for the sync, so it ends the retries' held batch)
  t.same(await w!.reserve(reserveInput(tok, { idempotencyKey: 'k-0', fingerprint: 'f' })), { kind: 'replay', status: 200, body: '{"first":1}' }, 'the call settled before still replays');
  for (const r of retries) await v!.refund(r.id, T0 + 4);
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [1]);
  t.same((await main.verifyLedger()).ok, true, 'the counters equal the ledger');
});

t.test('a full disk planted in the writer (the test fault of world.ts diskFull): taken between two commits, the next ones fail with ENOSPC after their writes, nothing of them committed; freed, the writer commits again', async (t) => {
  const { main, writer, workers: [w] } = await writerWith(t, 1, tempDir(), HOLD_LONG_MS);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 9, period: 'never' }]);
  await main.insertToken(tok);
  const reserved = async (key: string) => {
    const out = await w!.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'f' }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    return out.reservation;
  };
  const a = await reserved('k-a');
  // a's batch is open, held for minutes until a write that needs the sync joins it: the fault
  // waits for its commit
  const c0 = commitsOf(main);
  const planted = writer.diskFull(1);
  t.equal((await w!.settle(a, T0 + 1, () => '{"a":1}', [])).kind, 'settled', 'the batch open when the fault was sent commits');
  await planted;
  t.equal(commitsOf(main), c0 + 1);
  const b = await reserved('k-b');
  t.match(await w!.settle(b, T0 + 2, () => '{"b":1}', []), { kind: 'not_recorded', refund: 'refunded', cause: { code: 'ENOSPC', cause: { message: /no space left on device/ } } }, 'the next commit fails as on a full disk: b\'s reservation, answered before it, is gone with it');
  t.equal(commitsOf(main), c0 + 1, 'nothing of it committed');
  const c = await reserved('k-c');
  t.equal((await w!.settle(c, T0 + 3, () => '{"c":1}', [])).kind, 'settled', 'one commit failed: the one after it commits');
  await writer.diskFull(Infinity);
  for (const key of ['k-d', 'k-e']) {
    const r = await reserved(key);
    t.match(await w!.settle(r, T0 + 4, () => '{}', []), { kind: 'not_recorded', cause: { code: 'ENOSPC' } }, `${key}: every commit fails until freed`);
  }
  t.equal(commitsOf(main), c0 + 2);
  await writer.diskFull(null);
  const f = await reserved('k-f');
  t.equal((await w!.settle(f, T0 + 5, () => '{"f":1}', [])).kind, 'settled', 'freed: the writer commits again');
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [3], 'a, c and f charged, nothing of the others');
  t.same((await main.verifyLedger()).ok, true, 'the counters equal the ledger');
});

t.test('the writer\'s full disk is a test\'s only: no code of the service asks for it', async (t) => {
  // only a test's own thread calls MeteringWriter.diskFull (no setting or request leads there),
  // and only the writer thread's handler of its message plants it
  const found: string[] = [];
  const src = path.join(ROOT, 'src');
  for (const file of fs.readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
    const text = fs.readFileSync(path.join(src, file), 'utf8');
    if (/\.diskFull\(|[^.]plantDiskFull\(/.test(text.replace(/export function plantDiskFull\(/, ''))) found.push(file);
  }
  t.same(found, ['store/lmdb/writer-thread.ts'], 'plantDiskFull called by the writer thread alone, and MeteringWriter.diskFull by nothing in src/');
});

t.test('audit lines ride with the worker\'s next settlement, and the queue\'s own commit goes through the writer', async (t) => {
  const { main, workers: [w] } = await writerWith(t, 1, tempDir(), HOLD_LONG_MS);
  const s = w!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  const line = s.writeAudit(auditLine('req_ride'));
  t.equal(s.store.audit.length, 1, 'queued');
  const before = commitsOf(main);
  const out = await s.reserve(reserveInput(tok));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  // a reservation is answered before its commit: the line waits for a write answered after one
  t.equal(s.store.audit.length, 1, 'not taken by the reservation');
  t.equal((await s.settle(out.reservation, T0 + 1, () => '{}', [])).kind, 'settled');
  await line;
  t.equal(commitsOf(main) - before, 1, 'one commit: the reservation and its settlement with the line');
  t.equal(s.store.audit.length, 0);
  const alone = [s.writeAudit(auditLine('req_alone_1')), s.writeAudit(auditLine('req_alone_2'))];
  await s.store.audit.flush();
  await Promise.all(alone);
  main.store.root.resetReadTxn();
  t.same([...main.store.db.audit.getRange({})].map((e) => e.value.request_id).sort(), ['req_alone_1', 'req_alone_2', 'req_ride']);
});

/** Stands for an API worker that dies with requests queued: its raw end of a channel. */
function rawWorker(writer: MeteringWriter) {
  const port: MessagePort = writer.connect()!.port;
  let next = 1;
  const replies = new Map<number, WriterReply>();
  port.on('message', (r: WriterReply) => replies.set(r.id, r));
  return {
    port,
    post(req: Omit<WriterRequest, 'id'>): number {
      const id = next++;
      port.postMessage({ id, ...req });
      return id;
    },
    reply: (id: number) => waitFor(() => replies.get(id), { what: `the writer's answer to request ${id}` }),
  };
}

t.test('a dead API worker: what it had posted is committed, and what it held unsettled is refunded', async (t) => {
  const { main, writer } = await writerWith(t, 0);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);

  // 1. a worker posts its settlement and dies before the answer: the settlement stands
  const a = rawWorker(writer);
  const ra = await a.reply(a.post({ op: { op: 'reserve', input: reserveInput(tok, { idempotencyKey: 'ka', fingerprint: 'fa' }), thread: 9001 }, lines: [] }));
  if (!ra.ok) throw new Error(ra.error.message);
  const held = (ra.value as { kind: 'reserved'; reservation: Reservation }).reservation;
  a.post({ op: { op: 'settle', reservation: held, at: T0 + 1, body: '{"a":1}', results: [], fault: null }, lines: [auditLine('req_dead_a')] });
  a.port.close();

  // 2. a worker posts a reservation and dies before any answer: it is committed, then refunded
  //    by the writer, which has run everything the worker posted before its port closed, and
  //    the main thread's recovery of that thread (when it sees the exit) reports it
  const b = rawWorker(writer);
  b.port.postMessage({ hello: 9002 });
  // (a worker says hello when it opens its store, long before it dies: an answer first)
  await b.reply(b.post({ op: null, lines: [] }));
  const inputB = reserveInput(tok, { idempotencyKey: 'kb', fingerprint: 'fb' });
  b.post({ op: { op: 'reserve', input: inputB, thread: 9002 }, lines: [] });
  b.port.close();
  const recovered = await main.recoverThread(9002, T0 + 5);
  t.same(recovered.map((r) => [r.request_id, r.thread]), [[inputB.requestId, 9002]], 'the recovery of the dead thread reports the reservation the writer committed and refunded');

  const state = (id: string) => {
    main.store.root.resetReadTxn();
    return main.store.db.reservations.get(id)?.state;
  };
  await waitFor(() => state(held.id) === 'charged', { what: 'the dead worker\'s settlement' });
  t.equal(state(recovered[0]!.id), 'refunded');
  t.same((await main.reserve(reserveInput(tok, { idempotencyKey: 'ka', fingerprint: 'fa' }))), { kind: 'replay', status: 200, body: '{"a":1}' }, 'the settled key replays');
  const again = await main.reserve({ ...inputB, requestId: 'req_b_retry' });
  t.equal(again.kind, 'reserved', 'the refunded key is free for the retry');
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [2], 'a charged once, b refunded, its retry held');
  t.same((await main.verifyLedger()).ok, true);
  main.store.root.resetReadTxn();
  t.ok(main.store.db.audit.get([Date.parse(auditLine('x').at), 'req_dead_a']), 'the audit line it had posted was written with its settlement');
});

t.test('a writer that is gone: a write in flight hears so (outcome unknown), later writes commit on the calling thread', async (t) => {
  const dir = tempDir();
  const main = LmdbBackend.open(dir);
  t.teardown(() => main.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  // a channel whose far end is the test's: it never answers, then closes
  const { port1, port2 } = new MessageChannel();
  const client = new WriterClient(port2);
  const s = LmdbBackend.open(dir, { writer: client });
  t.teardown(() => s.close());
  const asked = new Promise<WriterRequest>((resolve) => port1.on('message', (m: WriterRequest | { hello: number }) => {
    if (!('hello' in m)) resolve(m);
  }));
  const inFlight = s.reserve(reserveInput(tok));
  t.equal((await asked).op?.op, 'reserve', 'the reservation went to the writer');
  port1.close();
  await t.rejects(inFlight, /metering writer thread has ended/);
  t.notOk(client.alive);
  const out = await s.reserve(reserveInput(tok));
  t.equal(out.kind, 'reserved', 'the next reservation commits here');
  if (out.kind !== 'reserved') return;
  t.equal((await s.settle(out.reservation, T0 + 1, () => '{}', [])).kind, 'settled');
});

t.test('a writer that ends with a settlement in flight: a settlement it committed is answered settled, one it did not is settlement_failed', async (t) => {
  const dir = tempDir();
  const main = LmdbBackend.open(dir);
  t.teardown(() => main.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  for (const commit of [true, false]) {
    // a channel whose far end is the test's: it commits the settlement (or not) and ends
    // without answering, as a writer thread that dies after its commit
    const { port1, port2 } = new MessageChannel();
    const s = LmdbBackend.open(dir, { writer: new WriterClient(port2) });
    port1.on('message', (m: WriterRequest | { hello: number }) => {
      if ('hello' in m || m.op?.op !== 'settle') return;
      const op = m.op;
      if (commit) main.store.root.transactionSync(() => settleWrites(main.store, op.reservation, op.at, op.body, op.results, null));
      port1.close();
    });
    const out = await main.reserve(reserveInput(tok, { idempotencyKey: `k${String(commit)}`, fingerprint: 'f' }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    const settled = await settle(s.store, out.reservation, T0 + 1, () => '{"s":1}', []);
    await s.close();
    if (commit) t.same(settled, { kind: 'settled', body: '{"s":1}' }, 'committed by the writer before it ended: answered as charged');
    else t.equal(settled.kind, 'settlement_failed', 'not committed: marked for an operator, as before');
    main.store.root.resetReadTxn();
    t.equal(main.store.db.reservations.get(out.reservation.id)?.state, commit ? 'charged' : 'settlement_failed');
  }
});

t.test('a writer that ends after answering a reservation it never committed: the settlement answers not_recorded, nothing charged, the key free', async (t) => {
  const dir = tempDir();
  const main = LmdbBackend.open(dir);
  t.teardown(() => main.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  // the far end stands for a writer thread that answers a reservation before its commit (as
  // the writer does) and ends before committing it: the transaction is aborted
  const { port1, port2 } = new MessageChannel();
  const s = LmdbBackend.open(dir, { writer: new WriterClient(port2) });
  t.teardown(() => s.close());
  port1.on('message', (m: WriterRequest | { hello: number }) => {
    if ('hello' in m || m.op?.op !== 'reserve') return;
    const op = m.op;
    let value: unknown;
    try {
      main.store.root.transactionSync(() => {
        value = reserveWrites(main.store, op.input, op.thread);
        throw new Error('the thread ends before the commit');
      });
    } catch {
      // aborted: nothing of the reservation is stored
    }
    port1.postMessage({ id: m.id, ok: true, value } satisfies WriterReply);
    port1.close();
  });
  const out = await s.reserve(reserveInput(tok, { idempotencyKey: 'k-w', fingerprint: 'f' }));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  const settled = await s.settle(out.reservation, T0 + 1, () => '{}', []);
  t.match(settled, { kind: 'not_recorded', refund: 'refunded' }, 'no trace of the reservation: not recorded (503 store_unavailable), not settlement_failed');
  t.same(await main.listSettlementFailed(), [], 'nothing for an operator');
  t.same((await main.usageSnapshot(tok, T0)).map((u) => u.used), [0], 'nothing charged');
  t.equal((await main.reserve(reserveInput(tok, { idempotencyKey: 'k-w', fingerprint: 'f' }))).kind, 'reserved', 'the key is free');
  t.same((await main.verifyLedger()).ok, true);
});

// (a commit the writer cannot write, a full disk, is tested through the server, where every
// LMDB_COMMITS=sync server commits through the writer: test/metering/full-disk.test.ts)
t.test('a settlement the writer refuses is marked settlement_failed, as on its own thread', async (t) => {
  const { main, workers: [w] } = await writerWith(t, 1);
  const s = w!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  const out = await s.reserve(reserveInput(tok));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  // the test's settlement fault throws inside the writer's batch, before any write: the settlement
  // is refused, the reservation marked settlement_failed for an operator, as on its own thread
  const failed = await settle(s.store, out.reservation, T0 + 1, () => '{"x":1}', [], 'fail');
  t.equal(failed.kind, 'settlement_failed');
  t.same((await main.listSettlementFailed()).map((r) => [r.id, r.unsaved_body]), [[out.reservation.id, '{"x":1}']], 'listed for an operator with the answer that could not be saved');
});

// The writer runs a request's checks apart from its writes, with no child transaction to undo a
// refused one (writer-thread.ts runOne): that holds only because the checks write nothing.
// Shown for the settlement on the open transaction itself: after each refusal, nothing of it is
// in it.
t.test('a settlement refuses in its checks, before any write: the open transaction holds nothing of it', async (t) => {
  const main = LmdbBackend.open(tempDir());
  t.teardown(() => main.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  const done = await main.reserve(reserveInput(tok, { idempotencyKey: 'k-done', fingerprint: 'f' }));
  const held = await main.reserve(reserveInput(tok, { idempotencyKey: 'k-held', fingerprint: 'f' }));
  if (done.kind !== 'reserved' || held.kind !== 'reserved') throw new Error('not reserved');
  t.equal((await main.settle(done.reservation, T0 + 1, () => '{"done":1}', [])).kind, 'settled');
  const { store } = main;
  store.root.resetReadTxn();
  const state = (r: Reservation) => ({
    reservation: store.db.reservations.get(r.id),
    results: store.db.results.get(r.request_id) ?? null,
    key: store.db.idempotency.get([tok.id, r.idempotency_key!]) ?? null,
  });
  const cases: [string, Reservation, 'fail' | null][] = [
    ['a settled reservation settled again', done.reservation, null],
    ['the test fault on a pending reservation', held.reservation, 'fail'],
    ['a reservation that does not exist', { ...held.reservation, id: 'rsv_missing' }, null],
  ];
  for (const [name, r, fault] of cases) {
    const before = state(r);
    let thrown: unknown;
    let inside: ReturnType<typeof state> | undefined;
    const abort = new Error('abort the test transaction');
    try {
      store.root.transactionSync(() => {
        try {
          settleWrites(store, r, T0 + 2, '{"again":1}', [{ again: 1 }], fault);
        } catch (err) {
          thrown = err;
        }
        inside = state(r);
        throw abort;
      });
    } catch (err) {
      if (err !== abort) throw err;
    }
    t.equal((thrown as Error | undefined)?.name, 'SettlementError', `${name}: refused`);
    t.same(inside, before, `${name}: nothing of it written`);
  }
});

t.test('a settlement whose answer cannot be rendered while its reservation is still in the writer\'s open batch: marked settlement_failed, as on its own thread', async (t) => {
  // held for minutes: the reservation stays answered and uncommitted until a write that needs
  // the sync joins its batch
  const { main, workers: [w] } = await writerWith(t, 1, tempDir(), HOLD_LONG_MS);
  const s = w!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  const out = await s.reserve(reserveInput(tok, { idempotencyKey: 'k-render', fingerprint: 'f' }));
  if (out.kind !== 'reserved') throw new Error(out.kind);
  // the render throws on the API worker, before anything is posted: the reservation is not
  // committed yet, but it will be (its batch is open), so this is no reservation lost
  const failed = await settle(s.store, out.reservation, T0 + 1, () => {
    throw new Error('the answer cannot be rendered');
  }, []);
  t.equal(failed.kind, 'settlement_failed', 'not not_recorded: the units are held and the key bound');
  t.same((await main.listSettlementFailed()).map((r) => r.id), [out.reservation.id], 'listed for an operator');
  t.equal((await s.reserve(reserveInput(tok, { idempotencyKey: 'k-render', fingerprint: 'f' }))).kind, 'settlement_failed', 'its key answers what the call heard');
});

// The durability rule's power-loss case (docs/metering.md "Commits and durability"). A power
// loss keeps what was synced and nothing else: the data file as it stood at the last sync, and
// LMDB after the reboot takes the last flushed meta (mdb.c mdb_pick_meta: a newer meta only if
// it is flushed or was written in the same boot; lmdb-js's safeRestore, LMDB_RESTORE=safe,
// makes it take the flushed one whatever the boot, as a new boot does). So: a copy of the data
// file taken while a call's reservation is answered and its batch not yet committed, opened
// with safeRestore, is the store such a power loss leaves. What this shows: that copy holds
// every charge answered before it, with its key replaying, and nothing of the call in flight,
// whose key is free. What it does not show: a commit written and not yet flushed at the loss
// (the writer's commit and its sync are one call, transactionSync; the copy cannot fall
// between them), nor the disk's own ordering of writes, which mdb.c's analysis covers.
t.test('power loss: the reservations not flushed are gone, every answered charge present and replaying, the unanswered keys free', async (t) => {
  const { storeDir, main, workers: [w] } = await writerWith(t, 1, tempDir(), HOLD_LONG_MS);
  const s = w!;
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'never' }]);
  await main.insertToken(tok);
  const answered: { key: string; body: string }[] = [];
  for (const key of ['k-1', 'k-2']) {
    const out = await s.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'f' }));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    const settled = await s.settle(out.reservation, T0 + 1, () => `{"key":"${key}"}`, []);
    if (settled.kind !== 'settled') throw new Error(settled.kind);
    answered.push({ key, body: settled.body });
  }
  // a call in flight: its reservation answered (the API worker goes on to inference), its batch
  // held open
  const inFlight = await s.reserve(reserveInput(tok, { idempotencyKey: 'k-in-flight', fingerprint: 'f' }));
  if (inFlight.kind !== 'reserved') throw new Error(inFlight.kind);
  // the power fails now: the disk holds what was synced
  const after = tempDir();
  fs.mkdirSync(path.join(after, 'store'));
  fs.copyFileSync(path.join(storeDir, 'data.mdb'), path.join(after, 'store', 'data.mdb'));
  // (the process lives on here: its call settles, which commits its batch)
  t.equal((await s.settle(inFlight.reservation, T0 + 2, () => '{}', [])).kind, 'settled');

  const restore = process.env.LMDB_RESTORE;
  process.env.LMDB_RESTORE = 'safe';
  let rebooted: LmdbBackend;
  try {
    rebooted = LmdbBackend.open(after);
  } finally {
    if (restore === undefined) delete process.env.LMDB_RESTORE;
    else process.env.LMDB_RESTORE = restore;
  }
  t.teardown(() => rebooted.close());
  rebooted.store.root.resetReadTxn();
  t.equal(rebooted.store.db.reservations.get(inFlight.reservation.id), undefined, 'the reservation in flight is gone');
  t.same((await rebooted.usageSnapshot(tok, T0)).map((u) => u.used), [2], 'the two answered charges are there, and only they');
  for (const { key, body } of answered) t.same(await rebooted.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'f' })), { kind: 'replay', status: 200, body }, `${key}: the answered call's key replays its answer`);
  const retry = await rebooted.reserve(reserveInput(tok, { idempotencyKey: 'k-in-flight', fingerprint: 'f' }));
  t.equal(retry.kind, 'reserved', 'the unanswered call\'s key is free: its retry runs afresh');
  t.same((await rebooted.verifyLedger()).ok, true, 'the counters equal the ledger');
});
