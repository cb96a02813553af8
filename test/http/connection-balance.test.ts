// Keep-alive connections spread over the API workers (issue 10): the kernel's SO_REUSEPORT hash
// can put most long-lived connections on one worker; that worker then closes a connection after
// an answer (Connection: close) so the client's next one is hashed afresh.

import t from 'tap';
import { ConnectionBalance, createBalanceTable } from '../../src/http/balance.ts';
import { makeToken, startServer } from '../helpers/server.ts';
import { RawConn, body, smallSingle, verifyHead, writeBody } from '../helpers/ingest.ts';

const OPTS = { windowMs: 500, minCalls: 16, ratio: 1.25 };

/** `calls[w]` calls answered by worker w at time `at`; returns which workers were told to shed. */
function step(workers: ConnectionBalance[], calls: number[], at: number): number[] {
  const shed: number[] = [];
  calls.forEach((n, w) => {
    for (let i = 0; i < n; i++) if (workers[w]!.answered(at)) shed.push(w);
  });
  return shed;
}

function fresh(): ConnectionBalance[] {
  const table = createBalanceTable(2);
  return [new ConnectionBalance(table, 0, OPTS, 0), new ConnectionBalance(table, 1, OPTS, 0)];
}

// A worker judges at its first answer after a window has passed, by the calls since it last
// judged (its own and the others').
t.test('shares: an overloaded worker sheds one connection per window, a balanced host none', async (t) => {
  let w = fresh();
  t.same(step(w, [30, 10], 100), [], '3:1 inside the first window: nobody judges yet');
  t.same(step(w, [1, 0], 600), [0], 'after the window the busy worker sheds one connection');
  t.same(step(w, [5, 0], 700), [], 'no second shed inside the next window');

  w = fresh();
  t.same(step(w, [20, 20], 100), []);
  t.same(step(w, [1, 1], 600), [], 'an even split sheds nothing');

  w = fresh();
  t.same(step(w, [30, 20], 100), []);
  t.same(step(w, [1, 1], 600), [], '3:2 is within the tolerance (share 0.61 < 1.25 / 2)');
});

t.test('too little traffic: the window runs on until there are enough calls to judge', async (t) => {
  const w = fresh();
  t.same(step(w, [5, 0], 100), []);
  t.same(step(w, [1, 0], 1000), [], '6 calls are too few');
  t.same(step(w, [10, 0], 5000), [0], 'the 16th call of one-sided traffic sheds, once');
});

t.test('one worker never sheds', async (t) => {
  const w = new ConnectionBalance(createBalanceTable(1), 0, OPTS, 0);
  t.same(step([w], [100], 10_000), []);
});

t.test('through the server: one keep-alive connection on one of two workers is closed after an answer, and nothing is lost', async (t) => {
  const server = await startServer({ ready: true, env: { WORKERS: '2' } });
  t.teardown(() => server.stop());
  const tok = await makeToken(server, ['rgb_liveness:10000:day']);
  const conn = new RawConn(server.port);
  await conn.connected;
  // All calls on one connection land on one worker: its share is 100 %, so once 16 calls and
  // half a second have passed it sheds this connection. Bounded: 400 calls at most.
  let answered = 0;
  let closing: Awaited<ReturnType<RawConn['response']>> | null = null;
  while (answered < 400) {
    const b = body([smallSingle(`balance-${answered}`)]);
    await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
    await writeBody(conn, b.body);
    const r = await conn.response();
    t.equal(r.status, 200, `call ${answered} answered 200`);
    answered++;
    if (r.headers['connection']?.toLowerCase() === 'close') {
      closing = r;
      break;
    }
  }
  t.ok(closing, `the connection was shed after ${answered} calls`);
  t.ok(answered >= 16, 'not before the fewest calls to judge by');
  t.equal(closing?.json?.results?.length, 1, 'the shedding answer is a whole verify answer');
  t.ok(closing?.headers['x-verdict-signature'], 'and signed');
  t.ok(await conn.waitClosed(10_000), 'then the server closes the connection');
  const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
  t.match(metrics, /^lv_connections_shed_total [1-9]/m, 'counted in lv_connections_shed_total');
  const me = (await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${tok.token}` } })).json()) as { usage: { module_id: string; used: number }[] };
  t.equal(me.usage.find((u) => u.module_id === 'rgb_liveness')?.used, answered, 'every answered call charged once');
});
