import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { bearer, makeToken, startServer, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { startApi } from '../helpers/api.ts';
import { ledgerVerify } from '../helpers/store.ts';

// One server for both tests (issue 43: a start fewer): the race runs on it, then it is the
// server killed in inference. Only captures named slow-* are held in inference (20 s), so the
// race's calls run at full speed.
const dataDir = tempDir();
const server = await startServer({ dataDir, env: { TEST_INFERENCE_DELAY_MS: '20000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' }, ready: true });
t.teardown(() => server.stop());

t.test('two requests racing for the last unit on different API workers: exactly one wins', async (t) => {
  // The kernel spreads connections over the API workers by a hash of the client's port, so which
  // worker a connection reaches is chance: race rounds until two of them had their two requests
  // on different workers (each round does with probability 1/2; 40 rounds miss with ~1e-11).
  let crossWorkerRounds = 0;
  for (let round = 0; round < 40 && crossWorkerRounds < 2; round++) {
    const { token } = await makeToken(server, ['rgb_liveness:1:day']);
    const bodies = [request([single({ id: `race-${round}-a` })]), request([single({ id: `race-${round}-b` })])];
    // Separate connections so the kernel may hand them to different workers.
    const results = await Promise.all(bodies.map((b) => postVerify(server.baseUrl, token, 'rgb_liveness', b, { connection: 'close' })));
    const statuses = results.map((r) => r.status).sort();
    t.same(statuses, [200, 429], `round ${round}: one 200, one 429`);
    const me = await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json();
    t.equal(me.usage[0].used, 1);
    const ids = new Set(results.map((r) => r.headers.get('x-request-id')));
    // the request log line may be written just after the answer: wait for both lines
    const lines = await waitFor(() => {
      const found = server.logLines().filter((l) => ids.has(l.request_id) && l.worker !== undefined);
      return found.length >= ids.size ? found : undefined;
    }, { what: `the log lines of round ${round}` });
    if (new Set(lines.map((l) => l.worker)).size === 2) crossWorkerRounds++;
  }
  t.equal(crossWorkerRounds, 2, 'two rounds raced across both API workers');
  const v = await ledgerVerify(server);
  t.equal(v.json.ok, true);
});

t.test('SIGKILL during inference: restart refunds the pending reservation and frees the key', async (t) => {
  const first = server;
  const { id: tokenId, token } = await makeToken(first, ['rgb_liveness:5:day']);
  const body = request([single({ id: 'slow-crash-1' })]);
  const inflight = postVerify(first.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-crash' }).catch((e) => e);
  // Wait until the reservation is written, then kill the process hard.
  const db = lmdbOpen(dataDir);
  const pending = await waitFor(() => {
    (db.reservations as any).resetReadTxn?.();
    // this token's: the race above left its own records in the store
    const rows = [...db.reservations.getRange({})].map((e) => e.value as any).filter((r) => r.token_id === tokenId);
    return rows.length > 0 ? rows : undefined;
  }, { timeoutMs: 30_000, what: 'the reservation of the in-flight call' });
  t.equal(pending.length, 1);
  t.equal(pending[0].state, 'pending');
  await db.close();
  t.equal((await (await fetch(`${first.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used, 1, 'held while running');
  await first.stop('SIGKILL');
  t.ok((await inflight) instanceof Error, 'the client saw the connection die');
  // The dead server's pid is then reused by an unrelated live process (here: this test's
  // parent, tap's runner: not this process, which the recovery below runs in and which counts
  // its own pid as a previous run's). The reservation names its holder by pid and start time,
  // so it is still seen as orphaned.
  t.type(pending[0].pid_start, 'string', 'the holder is recorded with its start time');
  const dbReuse = lmdbOpen(dataDir);
  const reusedBy = process.ppid;
  await dbReuse.reservations.put(pending[0].id, { ...pending[0], pid: reusedBy });
  await dbReuse.close();

  // The restart: the service's API in process on the dead server's DATA_DIR (test/helpers/api.ts:
  // the start-up steps a start runs, crash recovery included, with the service's own logger,
  // refund metrics and app; issue 43: this was a second started server).
  const second = await startApi({ dataDir, engine: 'real', ready: true });
  t.teardown(() => second.stop());
  const recovery = second.logLines().find((l) => /crash recovery: pending reservation refunded/.test(l.msg));
  t.ok(recovery, 'recovery is logged');
  t.equal(recovery.request_id, pending[0].request_id);
  t.equal(recovery.holder_pid, reusedBy, 'the dead holder is named holder_pid');
  const raw = second.logs.join('\n').split('\n').find((l) => l.includes('crash recovery: pending reservation refunded'))!;
  t.equal(raw.match(/"pid":/g)?.length, 1, 'one pid key per line: the logging process');
  t.equal((await (await fetch(`${second.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used, 0, 'refunded');
  t.match(await (await fetch(`${second.baseUrl}/metrics`)).text(), /^lv_units_total\{(?=[^}]*module="rgb_liveness")(?=[^}]*kind="refunded")[^}]*\} 1$/m,
    'the crash-recovery refund is counted in lv_units_total');
  const retry = await postVerify(second.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-crash' });
  t.equal(retry.status, 200, 'the key was released and the retry runs');
  t.equal(retry.headers.get('idempotency-replayed'), null);
  t.equal((await (await fetch(`${second.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used, 1);
  t.equal((await second.store.verifyLedger()).ok, true);
  const kinds = [...second.lmdb!.db.ledger.getRange({})].map((e) => e.value as any).filter((e) => e.token_id === tokenId).map((e) => e.kind);
  t.same(kinds, ['charge', 'refund', 'charge']);
});
