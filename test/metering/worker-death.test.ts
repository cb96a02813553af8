// Issue 44 section 3: the reservations of an API worker that dies are recovered when the
// worker is replaced, without a restart, and only that worker's: a call in flight on the other
// (live) worker keeps its reservation and its key. Through the real server on LMDB and on a real
// PostgreSQL (with a lease far longer than the test, so the lease sweep cannot be what refunds).
import http from 'node:http';
import t, { type Test } from 'tap';
import { request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer, tempDir, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import type { Reservation } from '../../src/store/records.ts';
import { reserveInput, T0, tokenRecord } from '../store/contract.ts';

t.setTimeout(600_000);

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }

/** One keep-alive connection per agent, so that the test knows which API worker serves it. */
const connection = () => new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(s: ServerHandle, agent: http.Agent | false, method: string, path: string, headers: Record<string, string> = {}, body?: Uint8Array): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method, path, headers, agent }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function workerOf(s: ServerHandle, agent: http.Agent): Promise<number> {
  const r = await call(s, agent, 'GET', '/health/live');
  const id = String(r.headers['x-request-id']);
  const line = await waitFor(() => s.logLines().find((l) => l.msg === 'request' && l.request_id === id), { what: `log line of ${id}` });
  return line.worker as number;
}

/** A connection served by API worker `want` (the kernel spreads new connections). */
async function connectionTo(s: ServerHandle, want: number): Promise<http.Agent> {
  for (let i = 0; i < 64; i++) {
    const agent = connection();
    if ((await workerOf(s, agent)) === want) return agent;
    agent.destroy();
  }
  throw new Error(`no connection landed on worker ${want}`);
}

function verify(s: ServerHandle, agent: http.Agent | false, token: string, id: string, key: string): Promise<Answer> {
  const body = request([single({ id })]);
  return call(s, agent, 'POST', '/v1/modules/rgb_liveness/verify', { ...bearer(token), 'content-type': body.contentType, 'content-length': String(body.body.length), 'idempotency-key': key }, body.body);
}

const used = async (s: ServerHandle, token: string) => (await (await fetch(`${s.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used as number;

// slow-*: inference held long enough for the worker to be killed while the call holds its reservation
const FAULTS = { WORKERS: '2', TEST_WORKER_FAULTS: '1', TEST_INFERENCE_DELAY_MS: '120000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' };

async function workerDeath(t: Test, s: ServerHandle) {
  t.teardown(() => s.stop('SIGKILL'));
  let exited = false;
  void s.exited.then(() => (exited = true));
  const { token } = await makeToken(s, ['rgb_liveness:10:day']);

  const dying = await connectionTo(s, 0);
  const living = await connectionTo(s, 1);
  t.teardown(() => { dying.destroy(); living.destroy(); });
  // one call held in inference on each worker, each with its reservation
  const lost = verify(s, dying, token, 'slow-dead', 'k-dead').catch((e: Error) => e);
  await waitFor(async () => (await used(s, token)) === 1, { timeoutMs: 60_000, what: 'the reservation on worker 0' });
  const kept = verify(s, living, token, 'slow-live', 'k-live').catch((e: Error) => e);
  await waitFor(async () => (await used(s, token)) === 2, { timeoutMs: 60_000, what: 'the reservation on worker 1' });

  // worker 0 exits (its own fault, on another connection to it) while its call is in inference
  const killer = await connectionTo(s, 0);
  t.equal((await call(s, killer, 'GET', '/health/live', { 'x-test-fault': 'exit' })).status, 200, 'the faulting request is answered, then worker 0 exits');
  killer.destroy();
  t.ok((await lost) instanceof Error, 'the call on the dead worker got no answer');
  const done = await waitFor(() => s.logLines().find((l) => l.msg === 'worker recovery finished'), { timeoutMs: 60_000, what: 'the dead worker\'s recovery' });
  t.equal(done.worker, 0, 'recovery ran for worker 0');
  t.equal(done.recovered, 1, 'one reservation recovered: the dead worker\'s, not the live one\'s');
  const line = s.logLines().find((l) => l.msg === 'worker recovery: pending reservation refunded, idempotency key released');
  t.equal(line?.units, 1, 'the refund is logged with its units');
  await waitFor(() => s.logLines().some((l) => l.msg === 'API worker replaced'), { timeoutMs: 120_000, what: 'the replacement' });

  t.equal(await used(s, token), 1, 'the dead worker\'s unit is refunded, the live call\'s is still reserved');
  // the live call's key is still held: a retry under it is told the call is in progress
  const inProgress = await verify(s, false, token, 'slow-live', 'k-live');
  t.equal(inProgress.status, 409, `the live worker's key is not released (${inProgress.body.slice(0, 120)})`);
  t.equal(JSON.parse(inProgress.body).error.code, 'request_in_progress');
  // the dead call's key is free: a new call under it runs afresh and is charged once
  const retry = await verify(s, false, token, 'retry-dead', 'k-dead');
  t.equal(retry.status, 200, `the released key runs a new call (${retry.body.slice(0, 120)})`);
  t.equal(retry.headers['idempotency-replayed'], undefined, 'not a replay');
  const again = await verify(s, false, token, 'retry-dead', 'k-dead');
  t.equal(again.status, 200);
  t.equal(again.headers['idempotency-replayed'], 'true', 'a second retry replays it');
  t.equal(again.body, retry.body, 'the same bytes');
  t.equal(await used(s, token), 2, 'charged for the live call\'s reservation and the retry only');
  const v = await s.cli(['ledger', 'verify']);
  t.equal(v.json.ok, true, 'the counters equal the ledger (the refund is a ledger entry, nothing charged twice)');
  t.notOk(exited, 'no restart: the process served throughout');
  t.ok(kept, 'the live call is still in flight (ended with the process)');
}

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

t.test('LMDB: a dead worker\'s reservations are recovered when it is replaced, the live worker\'s kept', async (t) => {
  await workerDeath(t, await startServer({ dataDir: tempDir(), env: FAULTS, ready: true }));
});

t.test('PostgreSQL: a dead worker\'s node is swept when it is replaced, not when its lease lapses', async (t) => {
  const pg = await pgStarting;
  // a lease (10 minutes, the most allowed) far longer than this test: only the replacement's recovery can refund in time
  await workerDeath(t, await startServer({ env: { ...FAULTS, DATABASE_URL: pg.url, NODE_LEASE_SECONDS: '600' }, ready: true, timeoutMs: 240_000 }));
});
