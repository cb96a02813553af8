import t from 'tap';
import { postVerify, request, single, type VerifyCall } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi, type ApiHandle } from '../helpers/api.ts';
import { bearer, makeToken, waitReady } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Two nodes of the real service on one PostgreSQL database under load while the database
// stops and starts again (issue 11, multi-node test part 3).
// Each node is the service's app and engine in process (test/helpers/api.ts: its own
// PostgreSQL store with its pool, node lease and recovery, as an API worker has them; issue 43:
// these were two server starts). A node that died of the outage (an unhandled pool error, a
// throw outside a request) would end this process and fail the file; a real process through a
// database outage, its API workers and main thread each with their pool, is
// test/store/failover.test.ts's.
const pg = await startPostgres();
t.teardown(() => pg.stop());
const env = { DATABASE_URL: pg.url, NODE_LEASE_SECONDS: '6', WORKERS: '1' };
// one after the other: a harness sets this process's environment while it starts
const nodes: ApiHandle[] = [];
for (let i = 0; i < 2; i++) nodes.push(await startApi({ env, engine: 'real', ready: true }));
t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
const cli = (args: string[]) => nodes[0]!.cli(args);
const used = async (node: ApiHandle, token: string) => (await (await fetch(`${node.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used as number;

t.test('database restart mid-load: no node dies, answers use the spec codes, counters equal the ledger', async (t) => {
  const live = nodes;
  const { token } = await makeToken(nodes[0]!, ['rgb_liveness:unlimited:day']);
  const finals = new Map<string, number>();
  const seen = new Set<number>();
  let stopLoad = false;
  const loop = async (lane: number) => {
    for (let k = 0; !stopLoad || k < 4; k++) {
      const key = `db-${lane}-${k}`;
      const body = request([single({ id: key })]);
      let r: VerifyCall | Error = new Error('not sent');
      // a client following the spec: same key, same bytes, honour Retry-After (bounded)
      for (let attempt = 0; attempt < 200; attempt++) {
        r = await postVerify(live[lane % 2]!.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': key }).catch((e: Error) => e);
        if (r instanceof Error) break;
        seen.add(r.status);
        // 500 inference_failed (a settlement refused after a lapsed lease) was refunded and
        // released its key: the same key may be sent again; settlement_failed is final
        const code = (r.json as { error?: { code?: string } } | undefined)?.error?.code;
        if (r.status !== 503 && r.status !== 409 && code !== 'inference_failed') break;
        await new Promise((res) => setTimeout(res, 250));
      }
      finals.set(key, r instanceof Error ? -1 : r.status);
      if (k > 200) break;
    }
  };
  const load = [0, 1, 2, 3].map(loop);
  // bounded wait for the load to be under way, then restart the database under it
  for (let i = 0; i < 400 && finals.size < 4; i++) await new Promise((r) => setTimeout(r, 25));
  await pg.halt();
  // a route other than verify meets the outage too: the store's StoreUnavailableError is
  // answered 503 server_busy with Retry-After, and logged as the store not answering
  const me = await fetch(`${live[0]!.baseUrl}/v1/me`, { headers: bearer(token) });
  const meBody = await me.json() as { error?: { code?: string; message?: string } };
  t.equal(me.status, 503, '/v1/me while the database is away');
  t.equal(meBody.error?.code, 'server_busy');
  t.equal(me.headers.get('retry-after'), '1');
  t.notMatch(meBody.error?.message ?? '', /ECONN|terminat|127\.0\.0\.1/i, 'the database\'s message stays in the log');
  t.ok(await waitFor(() => live[0]!.logLines().find((l) => l.msg === 'store not answering' && l.level === 40)), 'logged as the store not answering, a warning');
  await new Promise((r) => setTimeout(r, 1500)); // the outage itself: the database stays away this long
  await pg.resume();
  for (const n of live) await waitReady(n.baseUrl, 60_000);
  stopLoad = true;
  await Promise.all(load);
  for (const n of live) t.equal((await fetch(`${n.baseUrl}/health/live`)).status, 200, `node ${n.port} is still serving`);
  t.ok([...seen].every((s) => [200, 409, 500, 503].includes(s)), `statuses seen: ${[...seen].sort().join(', ')}`);
  const outcomes = [...finals.values()];
  t.ok(outcomes.every((s) => s === 200 || s === 500), `every call ended 200 or settlement_failed: ${JSON.stringify(Object.fromEntries(finals))}`);
  // a settlement that failed while the database was away is marked by its node after the
  // next lease renewal: polled, bounded
  const want = outcomes.filter((s) => s === 500).length;
  let failed = -1;
  for (let i = 0; i < 60 && failed !== want; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 500));
    failed = (await cli(['settlements', 'list'])).json.settlements.length as number;
  }
  t.equal(failed, want, 'every settlement_failed is listed for the operator');
  t.equal(await used(live[0]!, token), outcomes.length, 'each key charged exactly once (settled or held for the operator)');
  t.equal((await cli(['ledger', 'verify'])).json.ok, true, 'counters equal the ledger');
});
