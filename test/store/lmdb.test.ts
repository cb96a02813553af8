import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { processStartTime } from '../../src/store/owner.ts';
import type { Reservation } from '../../src/store/records.ts';
import { apiWorkerHandle } from '../helpers/lmdb.ts';
import { tempDir } from '../helpers/server.ts';
import { reserveInput, storeContract, T0, tokenRecord } from './contract.ts';

const store = LmdbBackend.open(tempDir());
t.teardown(() => store.close());
storeContract(t, store);

// LMDB_COMMITS=batched commits through lmdb-js's write thread: a transaction's callback runs
// later, after other calls of the same turn have read, so a rule that reads outside its write
// transaction passes with sync commits and breaks only here. The whole contract runs on both.
t.test('the store contract with LMDB_COMMITS=batched', async (t) => {
  const batched = LmdbBackend.open(tempDir(), { commits: 'batched' });
  t.teardown(() => batched.close());
  t.equal(batched.store.commits, 'batched');
  storeContract(t, batched);
});

// The service's API workers send their metering writes to the process's metering writer thread
// (src/store/lmdb/writer.ts), which runs the same rules in its own batches: the whole contract
// runs there too, on an API worker's handle. The writer answers a reservation before its batch
// commits (held open for a write that must be synced, 20 ms at most), and the contract reads
// its writes back at once: so each reservation here is followed by an empty request, which
// the writer answers after its commit (the audit queue's own commit) and which ends the hold.
// The timing of that answer is test/store/lmdb-writer.test.ts's.
t.test('the store contract through the metering writer', async (t) => {
  const dir = tempDir();
  const main = LmdbBackend.open(dir);
  const { store: worker, client } = apiWorkerHandle(main, dir);
  t.teardown(async () => {
    await worker.close();
    await main.close();
  });
  t.ok(worker.store.writer?.alive, 'an API worker\'s handle, with the writer');
  const reserve = worker.reserve.bind(worker);
  worker.reserve = async (input) => {
    const out = await reserve(input);
    const committed = await client.send(null, []);
    if (!committed.ok) throw new Error(`the writer's commit failed: ${committed.error.message}`);
    return out;
  };
  storeContract(t, worker);
});

// Recovery runs when a process starts, and another process may be using the same store at
// that moment (a second service, the CLI): its reservations are in flight, not orphaned.
t.test('crash recovery refunds the reservations of dead holders only: a running holder keeps its own', async (t) => {
  const s = LmdbBackend.open(tempDir());
  t.teardown(() => s.close());
  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  t.teardown(() => holder.kill('SIGKILL'));
  await new Promise((resolve, reject) => holder.once('spawn', resolve).once('error', reject));
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await s.insertToken(tok);
  const reserve = async (key: string, holderPid: number | null) => {
    const out = await s.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'fp' }));
    if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
    // this process's own pid stands for a previous run (recovery runs before serving)
    if (holderPid === null) return out.reservation;
    const r: Reservation = { ...out.reservation, pid: holderPid, pid_start: processStartTime(holderPid) };
    await s.store.db.reservations.put(r.id, r);
    return r;
  };
  const live = await reserve('k-live', holder.pid!);
  const dead = await reserve('k-dead', null);
  t.type(live.pid_start, 'string', 'the running holder is named by pid and start time');

  const first = await s.recoverPending(T0 + 10);
  t.same(first.map((r) => r.id), [dead.id], "only the dead holder's reservation is refunded");
  t.equal((await s.getReservation(live.id))!.state, 'pending', 'the running holder keeps its reservation');
  t.same((await s.usageSnapshot(tok, T0)).map((u) => u.used), [1], 'and its unit');
  t.equal((await s.reserve(reserveInput(tok, { idempotencyKey: 'k-live', fingerprint: 'fp' }))).kind, 'request_in_progress', 'and its key');
  const retry = await s.reserve(reserveInput(tok, { idempotencyKey: 'k-dead', fingerprint: 'fp' }));
  t.equal(retry.kind, 'reserved', "the dead holder's key is free again");

  holder.kill('SIGKILL');
  await new Promise((resolve) => (holder.exitCode !== null || holder.signalCode !== null ? resolve(null) : holder.once('exit', resolve)));
  const second = await s.recoverPending(T0 + 20);
  // the retry above is this process's own, standing for a previous run's as well
  const retried = retry.kind === 'reserved' ? [retry.reservation.id] : [];
  t.same(second.map((r) => r.id).sort(), [live.id, ...retried].sort(), 'once its holder is gone, it is refunded too');
  t.equal((await s.getReservation(live.id))!.state, 'refunded');
  t.ok((await s.verifyLedger()).ok);
});

t.test('a token changed by another thread holds for the next read, even within one event-loop turn', async (t) => {
  // lmdb-js keeps a thread's read snapshot until a timer resets it; an API worker that read a
  // token and, in the same turn, serves the next call after another worker committed a change
  // must see the change (an operator re-enabled a token, the next /v1/me answered 401)
  const dir = tempDir();
  const s = LmdbBackend.open(dir);
  t.teardown(() => s.close());
  const tok = tokenRecord([], { enabled: false });
  await s.insertToken(tok);
  t.equal((await s.getTokenByHash(tok.hash))?.enabled, false);
  const done = new Int32Array(new SharedArrayBuffer(4));
  // another thread of this process enables it, with lmdb-js directly (the same files, the
  // store's encoding defaults), and says so through shared memory
  const worker = new Worker(`
    const { workerData } = require('node:worker_threads');
    import(workerData.lmdb).then(({ open }) => {
      const root = open({ path: workerData.path, maxDbs: 32, compression: false });
      const tokens = root.openDB({ name: 'tokens' });
      tokens.putSync(workerData.id, { ...tokens.get(workerData.id), enabled: true });
      Atomics.store(workerData.done, 0, 1);
      Atomics.notify(workerData.done, 0);
    });`, { eval: true, workerData: { lmdb: import.meta.resolve('lmdb'), path: `${dir}/store`, id: tok.id, done } });
  t.teardown(() => worker.terminate());
  // blocking, so that no timer of this thread runs between the two reads
  t.equal(Atomics.wait(done, 0, 0, 30_000), 'ok', 'the other thread committed');
  t.equal((await s.getTokenByHash(tok.hash))?.enabled, true, 'read right after, in the same turn: enabled');
});
