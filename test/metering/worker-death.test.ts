// Issue 44 section 3: the reservations of an API worker that dies are recovered when the
// worker is replaced, without a restart, and only that worker's: a call in flight on the other
// (live) worker keeps its reservation and its key. Through the real server on LMDB and on a real
// PostgreSQL (with a lease far longer than the test, so the lease sweep cannot be what refunds).
//
// The LMDB case runs on test/metering/crash-points.test.ts's LMDB server, before that file's
// crash points end it (issue 43: a start fewer; the scenario is crash-scenarios.ts
// workerDeath, unchanged). The PostgreSQL one stays here on a server of its own: its lease
// must outlast the test, the crash points' must lapse within seconds.
import t from 'tap';
import { startPostgres } from '../helpers/postgres.ts';
import { startServer, tempDir } from '../helpers/server.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import type { Reservation } from '../../src/store/records.ts';
import { reserveInput, T0, tokenRecord } from '../store/contract.ts';
import { WORKER_FAULTS, workerDeath } from './crash-scenarios.ts';

t.setTimeout(600_000);

// The rule itself, on the store: only the named thread of this process (pid and start time) is
// recovered; this process's other threads and another process's thread of the same number keep theirs.
t.test('LMDB recoverThread: the dead thread of this process only', async (t) => {
  const s = LmdbBackend.open(tempDir());
  t.teardown(() => s.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await s.insertToken(tok);
  const reserve = async (key: string, patch: Partial<Reservation>) => {
    const out = await s.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'fp' }));
    if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
    const r: Reservation = { ...out.reservation, ...patch };
    await s.store.db.reservations.put(r.id, r);
    return r;
  };
  const own = await reserve('k-own', {});
  t.equal(own.thread, 0, 'a reservation names the thread that made it (the test\'s main thread: 0)');
  const dead = await reserve('k-dead', { thread: 7 });
  const otherProcess = await reserve('k-other', { thread: 7, pid: process.pid + 100000, pid_start: '1' });
  const recovered = await s.recoverThread(7, T0 + 10);
  t.same(recovered.map((r) => r.id), [dead.id], 'only thread 7 of this process');
  t.equal((await s.getReservation(own.id))!.state, 'pending', 'another thread of this process keeps its reservation');
  t.equal((await s.getReservation(otherProcess.id))!.state, 'pending', 'thread 7 of another process keeps its reservation');
  t.same(await s.recoverThread(7, T0 + 20), [], 'a second recovery refunds nothing more');
  t.equal((await s.reserve(reserveInput(tok, { idempotencyKey: 'k-dead', fingerprint: 'fp' }))).kind, 'reserved', 'the dead thread\'s key is free');
  t.equal((await s.reserve(reserveInput(tok, { idempotencyKey: 'k-own', fingerprint: 'fp' }))).kind, 'request_in_progress', 'the live thread\'s key is held');
  t.ok((await s.verifyLedger()).ok, 'the ledger verifies');
});

t.jobs = 2;
const pgStarting = startPostgres();
pgStarting.catch(() => undefined);
t.teardown(async () => (await pgStarting.catch(() => null))?.stop());

t.test('PostgreSQL: a dead worker\'s node is swept when it is replaced, not when its lease lapses', async (t) => {
  const pg = await pgStarting;
  // a lease (10 minutes, the most allowed) far longer than this test: only the replacement's recovery can refund in time
  const server = await startServer({ env: { ...WORKER_FAULTS, DATABASE_URL: pg.url, NODE_LEASE_SECONDS: '600' }, ready: true, timeoutMs: 240_000 });
  t.teardown(() => server.stop('SIGKILL'));
  await workerDeath(t, server);
});
