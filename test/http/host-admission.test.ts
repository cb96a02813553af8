// Host-wide admission over real HTTP (issue 10, issue 15): 2 x WORKERS verify slots shared by
// every API worker, so calls that the kernel happens to put on one worker are not refused while
// the other worker's slots idle; per client address and per token caps, so that 50 trickling
// connections from one address leave honest clients served; /metrics judges "loopback" by the
// same client-address rule as the audit.
//
// Slots are held by uploads that have sent half their body (the rate window is set long, so
// they stay until the test sends the rest): no timing decides who holds what.

import t from 'tap';
import { slotsUntil as slotsUntilOf } from '../helpers/metrics.ts';
import { makeToken, startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { RawConn, auditOf, body, expectRejected, finishHeld, headOnly, holdSlot, post, rawAnswer, smallSingle, snapshot, verifyHead, type Answer } from '../helpers/ingest.ts';

const server = await startServer({
  ready: true,
  env: { WORKERS: '2', TRUSTED_PROXIES: '127.0.0.1', UPLOADS_PER_ADDRESS: '2', UPLOADS_PER_TOKEN: '3', UPLOAD_RATE_WINDOW_SECONDS: '300' },
});
t.teardown(() => server.stop());
const tokA = await makeToken(server, ['rgb_liveness:10000:day']);
const tokB = await makeToken(server, ['rgb_liveness:10000:day']);
const tokC = await makeToken(server, ['rgb_liveness:10000:day']);

async function metricsText(headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const r = await fetch(`${server.baseUrl}/metrics`, { headers });
  return { status: r.status, text: await r.text() };
}
const slotsUntil = (want: number, what: string) => slotsUntilOf(server.baseUrl, want, what);

/** The API worker that served a request, from its request log line (polled: logs are async). */
async function workerOf(requestId: string): Promise<number> {
  const line = await waitFor(() => server.logLines().find((l) => l.request_id === requestId && l.msg === 'request'), { timeoutMs: 10_000, what: `the request log line of ${requestId}` });
  return line.worker;
}

/** Keep-alive connections that all landed on the same API worker: each is asked which worker
 * it is on; by pigeonhole, 2n - 1 connections to 2 workers hold n on one of them. */
async function connectionsOnOneWorker(n: number): Promise<{ worker: number; conns: RawConn[] }> {
  const byWorker = new Map<number, RawConn[]>();
  const spare: RawConn[] = [];
  for (let i = 0; i < 2 * n - 1 + 8; i++) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write('GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const r = await conn.response();
    const worker = await workerOf(r.headers['x-request-id']!);
    const list = byWorker.get(worker) ?? [];
    list.push(conn);
    byWorker.set(worker, list);
    if (list.length === n) {
      for (const [w, l] of byWorker) if (w !== worker) spare.push(...l);
      for (const c of spare) c.close();
      return { worker, conns: list };
    }
  }
  throw new Error('unreachable: pigeonhole');
}

t.test('2 x WORKERS calls in flight on connections of ONE worker: none gets 503, the next one does', async (t) => {
  const { worker, conns } = await connectionsOnOneWorker(4);
  // caps are 2 per address and 3 per token here, so four callers split over addresses and tokens
  const held = [
    await holdSlot(conns[0]!, tokA.token, '198.51.100.1'),
    await holdSlot(conns[1]!, tokA.token, '198.51.100.2'),
    await holdSlot(conns[2]!, tokB.token, '198.51.100.3'),
    await holdSlot(conns[3]!, tokB.token, '198.51.100.4'),
  ];
  await slotsUntil(4, 'four uploads in flight');
  t.notOk(held.some((h) => h.conn.hasAnswer), `all four calls on worker ${worker} were admitted (none answered early)`);

  // a caller already at its share (token A holds 2 of the 4): a new token would be served by
  // taking an upload's slot (fair shares: test/http/fair-capacity.test.ts)
  const fifth = await expectRejected(t, server, tokA, () => headOnly(server.port, tokA.token, '198.51.100.5'), { status: 503, code: 'server_busy' });
  t.match(fifth.json?.error?.message, /No capacity slot/, 'refused for the host being full, not for a cap');

  const statuses = await Promise.all(held.map(finishHeld));
  t.same(statuses, [200, 200, 200, 200], 'the four admitted calls complete');
  await slotsUntil(0, 'every slot back');
  t.equal((await post(server.baseUrl, tokC.token, body([smallSingle()]))).status, 200, 'a free host admits again');
});

t.test('50 trickling connections from one address hold only its cap; honest clients are served', async (t) => {
  const attacker = '203.0.113.9';
  const conns: RawConn[] = [];
  const answers: (Answer | null)[] = [];
  const b = body([smallSingle()]);
  for (let i = 0; i < 50; i++) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead({ token: tokA.token, contentType: b.contentType, contentLength: b.body.length, extra: { 'X-Forwarded-For': attacker } }));
    await conn.write(b.body.subarray(0, 10));
    conns.push(conn);
  }
  await slotsUntil(2, 'the attacker holding its per-address cap');
  for (const conn of conns) {
    // the two admitted ones stay unanswered; the others are answered at once
    answers.push(await conn.response({ answerWaitMs: 2_000 }).then(rawAnswer, () => null));
  }
  const refused = answers.filter((a): a is Answer => a !== null);
  t.equal(answers.filter((a) => a === null).length, 2, 'two trickling calls hold a slot each');
  t.equal(refused.length, 48, 'the other 48 were refused');
  t.ok(refused.every((a) => a.status === 503 && a.json?.error?.code === 'server_busy'), 'as 503 server_busy');
  t.match(refused[0]?.json?.error?.message, /client address/, 'the message names the address cap');
  const audit = await auditOf(server, refused[0]!.requestId!);
  t.same([audit?.status, audit?.error_code, audit?.charged_units, audit?.client_ip], [503, 'server_busy', 0, attacker], 'audited with the forwarded address, nothing charged');

  const honest = await post(server.baseUrl, tokB.token, body([smallSingle()]), { headers: { 'x-forwarded-for': '198.51.100.20' } });
  t.equal(honest.status, 200, 'an honest client from another address is served meanwhile');

  // per token: token A already holds 2 (from the attacker's address); one more from elsewhere
  // is allowed (cap 3), the next is refused for the token, another token still gets in
  const third = await holdSlot(await connected(), tokA.token, '198.51.100.30');
  await slotsUntil(3, 'token A holding three slots');
  const overToken = await expectRejected(t, server, tokA, () => headOnly(server.port, tokA.token, '198.51.100.31'), { status: 503, code: 'server_busy' });
  t.match(overToken.json?.error?.message, /token/, 'the message names the token cap');
  t.equal((await post(server.baseUrl, tokC.token, body([smallSingle()]), { headers: { 'x-forwarded-for': '198.51.100.32' } })).status, 200, 'another token is served');

  for (const c of conns) c.close();
  third.conn.close();
  await slotsUntil(0, 'the disconnected uploads giving their slots back');
  const stored = await snapshot(server, tokA.token);
  t.notOk(refused.some((a) => stored.dbs.ledger.includes(a.requestId!)), 'no refused call reached the ledger');
});

async function connected(): Promise<RawConn> {
  const conn = new RawConn(server.port);
  await conn.connected;
  return conn;
}

t.test('/metrics behind a trusted proxy on this host: loopback is judged by the forwarded client address', async (t) => {
  t.equal((await metricsText()).status, 200, 'a local scraper (no X-Forwarded-For) is served');
  t.equal((await metricsText({ 'x-forwarded-for': '127.0.0.1' })).status, 200, 'a loopback client through the proxy is served');
  const outside = await metricsText({ 'x-forwarded-for': '203.0.113.50' });
  t.equal(outside.status, 404, 'an outside client through the proxy gets the 404, not the metrics');
  t.notMatch(outside.text, /lv_http_requests_total/);
});
