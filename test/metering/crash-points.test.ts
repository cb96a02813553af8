// The durability rule's crash points (docs/metering.md "Commits and durability"), produced with SIGKILL on
// LMDB and on a real PostgreSQL: between a call's reservation and its settlement, inside the
// settlement's open transaction, and after the charged answer. At each, what the rule promises:
// nothing answered as charged is lost, nothing unanswered stays charged, and the key either
// replays the charged answer or runs afresh. (A power loss cannot be produced here; the
// analysis in the docs covers it.)
//
// Issue 43: the start after the kill is the service's API in process on the dead server's
// DATA_DIR or database (test/helpers/api.ts: the real app, engine and store, and the start-up
// steps a start runs, crash recovery and on PostgreSQL the lease sweep included); it was a
// second started server per store. What a restart is asked here is the store's recovery and
// the answers over HTTP afterwards, which are the same code in process; the kill itself stays
// a SIGKILL of a real server, with its API workers, writer thread and open transactions.
// Planted by hand after the change: LMDB recovery refunding nothing (recoverPending skipped in
// startupHooks) fails the LMDB test at "recovery to refund ..."; the PostgreSQL sweep never
// taking a lapsed node (lv_sweep_expired's lease test inverted) fails the PostgreSQL one there.
import t, { type Test } from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi, type ApiHandle } from '../helpers/api.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer, tempDir, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

const used = async (node: { baseUrl: string }, token: string) => (await (await fetch(`${node.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used as number;

// slow-*: inference held long enough to be killed in it; hold-*: the settlement stops inside
// its open transaction (TEST_SETTLEMENT_HOLD_PREFIX) until the kill
const FAULTS = { TEST_INFERENCE_DELAY_MS: '120000', TEST_INFERENCE_DELAY_PREFIX: 'slow-', TEST_SETTLEMENT_HOLD_PREFIX: 'hold-' };

/** `killed`: the server the kill lands on; `restart`: the start after it, in process. */
async function crashPoints(t: Test, killed: ServerHandle, restart: () => Promise<ApiHandle>, recoveryMs: number) {
  t.teardown(() => killed.stop('SIGKILL'));
  let node: ServerHandle | ApiHandle = killed;
  const { token } = await makeToken(node, ['rgb_liveness:10:day']);

  // 3. after the charged answer: answered first, so the one kill below finds it charged and
  // settled (issue 43: this had a kill and restart of its own; one kill covers all three points)
  const after = request([single({ id: 'after-1' })]);
  // a client as the spec asks: a 503 (charged nothing, the key not bound) is sent again with the
  // same key and bytes after its Retry-After, bounded; one was seen here on a heavily loaded host
  // (load average ~20 on 2 cores), its code not kept then: it is now, in the comment
  let answered = await postVerify(node.baseUrl, token, 'rgb_liveness', after, { 'idempotency-key': 'k-after' });
  for (let i = 0; i < 10 && answered.status === 503; i++) {
    t.comment(`503 before the crash points: ${answered.text.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 1000 * Number(answered.headers.get('retry-after') ?? '1')));
    answered = await postVerify(node.baseUrl, token, 'rgb_liveness', after, { 'idempotency-key': 'k-after' });
  }
  t.equal(answered.status, 200, answered.text.slice(0, 300));
  t.equal(await used(node, token), 1);

  // 1. between the reservation and the settlement, and 2. inside the settlement's transaction
  // (its writes made, not committed): both calls are in flight at the one kill, so one restart
  // (and, on PostgreSQL, one lease lapse) covers both crash points. The call in inference
  // reserves first: the held settlement then stops its API worker for good.
  const between = request([single({ id: 'slow-between' })]);
  const lost = postVerify(node.baseUrl, token, 'rgb_liveness', between, { 'idempotency-key': 'k-between' }).catch((e: Error) => e);
  await waitFor(async () => (await used(node, token)) === 2, { timeoutMs: 60_000, what: 'the reservation of the call in inference' });
  const during = request([single({ id: 'hold-during' })]);
  const held = postVerify(node.baseUrl, token, 'rgb_liveness', during, { 'idempotency-key': 'k-during' }).catch((e: Error) => e);
  await waitFor(() => killed.logLines().some((l) => l.msg === 'test fault: holding'), { timeoutMs: 60_000, what: 'the settlement held in its transaction' });
  await killed.stop('SIGKILL');
  const again = await restart();
  t.teardown(() => again.stop());
  node = again;
  t.ok((await lost) instanceof Error, 'between: the client got no answer');
  t.ok((await held) instanceof Error, 'during: the client got no answer');
  // both were reserved (a unit each) and neither was answered: 1 (the answered call's) only
  // when both are refunded; the answered call's unit is checked to stay below, by the retries
  // (3) and the replay
  await waitFor(async () => (await used(node, token)) === 1, { timeoutMs: recoveryMs, what: 'recovery to refund the dead holder\'s reservation and the one whose settlement never committed' });
  t.pass('between: the reservation was refunded');
  t.pass('during: the uncommitted settlement left nothing charged');

  // the keys of both unanswered calls are free: their retries run afresh and are charged
  for (const [key, id] of [['k-between', 'retry-between'], ['k-during', 'retry-during']] as const) {
    // the same body as the first try would be held again by the faults: another body under a
    // released key is a new call (the key is unbound), so the fingerprint cannot conflict
    const retry = await postVerify(node.baseUrl, token, 'rgb_liveness', request([single({ id })]), { 'idempotency-key': key });
    t.equal(retry.status, 200, `${key}: the key was released and a new call under it runs (${retry.text.slice(0, 200)})`);
    t.equal(retry.headers.get('idempotency-replayed'), null, `${key}: not a replay`);
  }
  t.equal(await used(node, token), 3, 'after: the charge survived the kill; charged for the two retries besides');

  const replay = await postVerify(node.baseUrl, token, 'rgb_liveness', after, { 'idempotency-key': 'k-after' });
  t.equal(replay.status, 200);
  t.equal(replay.headers.get('idempotency-replayed'), 'true', 'after: the key replays');
  t.equal(replay.text, answered.text, 'after: byte for byte the answer the client got');
  t.equal(await used(node, token), 3, 'after: the replay charged nothing');
  const v = await node.cli(['ledger', 'verify']);
  t.equal(v.json.ok, true, 'the counters equal the ledger');
}

// The two stores' runs go side by side (their own servers, DATA_DIRs and database): each is
// mostly restarts and, on PostgreSQL, lease lapses. The database is made (initdb, start) at
// once; stopped with the file.
t.jobs = 2;
const pgStarting = startPostgres();
// a failed start is reported where the PostgreSQL test awaits it
pgStarting.catch(() => undefined);
t.teardown(async () => (await pgStarting.catch(() => null))?.stop());

t.test('LMDB: every crash point leaves a consistent store', async (t) => {
  const dataDir = tempDir();
  // recovery runs at start, before the node answers
  await crashPoints(t, await startServer({ dataDir, env: FAULTS, ready: true }), () => startApi({ dataDir, env: FAULTS, engine: 'real', ready: true }), 10_000);
});

t.test('PostgreSQL: every crash point leaves a consistent database', async (t) => {
  const pg = await pgStarting;
  const LEASE_S = 3;
  // a new node on the same database after each kill; the dead node's reservations are refunded
  // once its lease lapses (a third of a lease between sweeps), so recovery takes a few seconds
  const env = { ...FAULTS, DATABASE_URL: pg.url, NODE_LEASE_SECONDS: String(LEASE_S), WORKERS: '1' };
  await crashPoints(t, await startServer({ env, ready: true, timeoutMs: 240_000 }), () => startApi({ env, engine: 'real', ready: true }), 60_000);
});
