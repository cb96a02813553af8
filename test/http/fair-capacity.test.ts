// Fair verify capacity over real HTTP (security issue 29, item 3): a host of four verify slots
// (WORKERS=2 at the spec's 2 a worker; VERIFY_SLOTS=4 here), and the default caps let one token
// or one address take all four. Trickling
// uploads that never complete used to hold them for as long as an upload may last; now a
// caller below its fair share takes the slot of the oldest upload of the caller with the most
// slots (src/http/capacity.ts), so:
//   - two tokens trickling on 12 connections each, from 3 addresses each, leave a third token
//     on another address served on at least 80 % of its calls;
//   - 30 trickling connections from one address leave a client on another address served on
//     at least 80 % of its calls;
//   - a lone tenant still gets every slot (fairness costs no throughput when nobody contends).
//
// The attackers behave as the reported attack did: each connection sends a verify head and
// trickles its body at ~12 KB/s (1,200 bytes per 100 ms tick, far above UPLOAD_MIN_BYTES_PER_SECOND
// set here, so a starved test process never turns a trickle into a 408), never sending the last
// byte; a refused or revoked connection reconnects after 250 ms. The honest client waits until
// the attackers hold every slot, then calls in sequence: its calls are counted, not timed. Every
// loop is bounded in count and time.
//
// The host is the service's app and engine in process (test/helpers/api.ts: one API worker over
// a slot table of four, composed by composeApiWorker with the real HostAdmission; issue 43: this
// was a server start of WORKERS=2). The fair-share rule is the shared table's, decided there
// for every worker alike; two workers on one table, a revocation crossing from one to the other
// included, are test/http/fair-admission.test.ts's (two HostAdmission instances on one
// SharedArrayBuffer), and calls held on the connections of one of two real API workers are
// test/http/host-admission.test.ts's.

import t from 'tap';
import { metric as metricOf, slotsInUse as slotsInUseOf } from '../helpers/metrics.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { RawConn, auditOf, body, post, rawAnswer, smallSingle, verifyHead, type Answer } from '../helpers/ingest.ts';

const server = await startApi({
  engine: 'real',
  ready: true,
  // a long rate window: the half bodies that hold slots below stall until the test sends the
  // rest, and only a revocation (not a 408 on a slow machine) may end them
  env: { VERIFY_SLOTS: '4', TRUSTED_PROXIES: '127.0.0.1', UPLOAD_MIN_BYTES_PER_SECOND: '1000', UPLOAD_RATE_WINDOW_SECONDS: '300' },
});
t.teardown(() => server.stop());

const metric = (name: string) => metricOf(server.baseUrl, name);
const slotsInUse = () => slotsInUseOf(server.baseUrl);

// one valid call whose single frame is ~900 KB: at 12 KB/s its body takes over a minute, and the
// trickle stops one byte short of it anyway
const BIG = body([smallSingle(undefined, new Uint8Array(900_000).fill(7))]);
const TICK_MS = 100;
const BYTES_PER_TICK = 1200;
const RETRY_MS = 250;
const MAX_CALLS_PER_LOOP = 400;

interface Trickling {
  conn: RawConn;
  sent: number;
}

/** Connections that each hold (or try to hold) a verify slot with a body that never ends. */
class Attack {
  private readonly live = new Set<Trickling>();
  private stopped = false;
  private readonly ticker: NodeJS.Timeout;
  private readonly loops: Promise<void>[] = [];
  calls = 0;
  /** answers to uploads whose slot went to another caller (503, the fair-share message) */
  revoked: Answer[] = [];

  constructor(callers: { token: string; address: string; connections: number }[], deadlineMs: number) {
    const deadline = Date.now() + deadlineMs;
    this.ticker = setInterval(() => {
      for (const c of this.live) {
        const end = Math.min(BIG.body.length - 1, c.sent + BYTES_PER_TICK);
        if (end <= c.sent) continue;
        c.conn.socket.write(BIG.body.subarray(c.sent, end));
        c.sent = end;
      }
    }, TICK_MS);
    for (const caller of callers) {
      for (let i = 0; i < caller.connections; i++) this.loops.push(this.loop(caller.token, caller.address, deadline));
    }
  }

  private async loop(token: string, address: string, deadline: number): Promise<void> {
    for (let n = 0; n < MAX_CALLS_PER_LOOP && !this.stopped && Date.now() < deadline; n++) {
      const conn = new RawConn(server.port);
      try {
        await conn.connected;
      } catch {
        conn.close();
        continue;
      }
      const entry: Trickling = { conn, sent: 0 };
      this.calls++;
      await conn.write(verifyHead({ token, contentType: BIG.contentType, contentLength: BIG.body.length, extra: { 'X-Forwarded-For': address } }));
      this.live.add(entry);
      // answered (refused, or revoked mid-upload), or closed by stop()
      const r = await conn.response({ answerWaitMs: Math.max(1, deadline - Date.now()) }).catch(() => null);
      if (r && /share/.test(String(r.json?.error?.message))) this.revoked.push(rawAnswer(r));
      this.live.delete(entry);
      conn.close();
      if (this.stopped) break;
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.ticker);
    for (const c of this.live) c.conn.close();
    await Promise.all(this.loops);
  }
}

/** `calls` verify calls in sequence by an honest client; the statuses. */
async function honest(token: string, address: string, calls: number): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < calls; i++) {
    answers.push(await post(server.baseUrl, token, body([smallSingle()]), { headers: { 'x-forwarded-for': address } }));
  }
  return answers;
}

const fullHost = () => waitFor(async () => (await slotsInUse()) === 4, { timeoutMs: 30_000, what: 'the attackers to hold all four slots' });
const idleHost = () => waitFor(async () => (await slotsInUse()) === 0, { timeoutMs: 30_000, what: 'every slot back' });

t.test('two tokens trickling on 12 connections each from 3 addresses each: a third token is served', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:100000:day']);
  const b = await makeToken(server, ['rgb_liveness:100000:day']);
  const c = await makeToken(server, ['rgb_liveness:10000:day']);
  const callers = [
    ...['198.51.100.1', '198.51.100.2', '198.51.100.3'].map((address) => ({ token: a.token, address, connections: 4 })),
    ...['198.51.100.11', '198.51.100.12', '198.51.100.13'].map((address) => ({ token: b.token, address, connections: 4 })),
  ];
  const attack = new Attack(callers, 120_000);
  try {
    await fullHost();
    const answers = await honest(c.token, '203.0.113.50', 20);
    const ok = answers.filter((r) => r.status === 200).length;
    t.ok(ok >= 16, `the third token got 200 on ${ok} of 20 calls (statuses ${answers.map((r) => r.status).join(',')})`);
    t.ok(answers.every((r) => r.status === 200 || (r.status === 503 && r.json?.error?.code === 'server_busy')), 'any refusal is 503 server_busy');
    // the attack goes on past its first 24 connections: the refused and revoked ones come back
    // (after RETRY_MS; the honest calls may all be over before that, so this is awaited)
    await waitFor(() => attack.calls > 24, { timeoutMs: 30_000, what: 'an attacker to call again' });
    t.pass(`the attackers kept calling (${attack.calls} calls)`);
  } finally {
    await attack.stop();
  }
  await idleHost();
  t.equal((await fetch(`${server.baseUrl}/health/live`)).status, 200, 'the server is still up');
});

t.test('30 trickling connections from one address: a client on another address is served; a revoked upload is a clean 503', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:100000:day']);
  const c = await makeToken(server, ['rgb_liveness:10000:day']);
  const busyBefore = await metric('lv_verify_busy_total');
  const attack = new Attack([{ token: a.token, address: '203.0.113.9', connections: 30 }], 120_000);
  let answers: Answer[];
  try {
    await fullHost();
    answers = await honest(c.token, '198.51.100.40', 20);
    // The revoked upload is still trickling, so its answer goes out at the early answer's
    // first drain tick (src/http/respond.ts, 200 ms) rather than at once, and the honest calls
    // can all be over before that: stopping the attack now closed that connection unanswered
    // (a suite run on a loaded host read 0 revocations). Awaited, bounded; none coming still
    // fails the count below.
    await waitFor(() => attack.revoked.length > 0, { timeoutMs: 15_000, what: "a revoked upload's answer" }).catch(() => undefined);
  } finally {
    await attack.stop();
  }
  const ok = answers.filter((r) => r.status === 200).length;
  t.ok(ok >= 16, `the other address got 200 on ${ok} of 20 calls (statuses ${answers.map((r) => r.status).join(',')})`);
  await idleHost();

  // the revoked uploads were answered 503 server_busy with Retry-After, audited, charged nothing
  t.ok(attack.revoked.length > 0, `uploads of the attacker were revoked (${attack.revoked.length})`);
  t.ok(attack.revoked.every((r) => r.status === 503 && r.json?.error?.code === 'server_busy'), 'as 503 server_busy');
  t.ok((await metric('lv_verify_busy_total')) > busyBefore, 'the busy counter counted them');
  for (const r of attack.revoked.slice(0, 3)) {
    const audit = await auditOf(server, r.requestId!);
    t.same([audit?.status, audit?.error_code, audit?.charged_units, audit?.client_ip], [503, 'server_busy', 0, '203.0.113.9'], 'audited for the attacker, nothing charged');
  }
  t.equal((await fetch(`${server.baseUrl}/health/live`)).status, 200, 'the server is still up');
});

t.test('a lone tenant still gets every slot, and a fifth call of its own is refused, not served by revoking itself', async (t) => {
  const a = await makeToken(server, ['rgb_liveness:100000:day']);
  const b = body([smallSingle()]);
  const half = Math.floor(b.body.length / 2);
  const conns: RawConn[] = [];
  for (let i = 0; i < 4; i++) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead({ token: a.token, contentType: b.contentType, contentLength: b.body.length, extra: { 'X-Forwarded-For': '198.51.100.60' } }));
    await conn.write(b.body.subarray(0, half));
    conns.push(conn);
  }
  await fullHost();
  const fifth = await post(server.baseUrl, a.token, body([smallSingle()]), { headers: { 'x-forwarded-for': '198.51.100.61' } });
  t.same([fifth.status, fifth.json?.error?.code], [503, 'server_busy'], 'the same token holding every slot is refused, not served by revoking its own upload');
  t.notOk(conns.some((c) => c.hasAnswer), 'none of its four uploads was revoked');
  for (const conn of conns) await conn.write(b.body.subarray(half));
  const statuses = await Promise.all(conns.map(async (conn) => (await conn.response()).status));
  for (const conn of conns) conn.close();
  t.same(statuses, [200, 200, 200, 200], 'all four calls of the lone tenant complete');
  await idleHost();
});

t.test('an IPv6 /64 is one address: four tokens on four addresses of one /64 hold every slot; a caller from another /64 is served', async (t) => {
  const tokens = await Promise.all([0, 1, 2, 3, 4].map(() => makeToken(server, ['rgb_liveness:10000:day'])));
  const b = body([smallSingle()]);
  const half = Math.floor(b.body.length / 2);
  // every slot its own token and its own address: counted by address, each caller holds one
  // slot, its share of four; counted by /64, one network holds all four
  const held: RawConn[] = [];
  for (let i = 0; i < 4; i++) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead({ token: tokens[i]!.token, contentType: b.contentType, contentLength: b.body.length, extra: { 'X-Forwarded-For': `2001:db8:77:1:${i + 1}::9` } }));
    await conn.write(b.body.subarray(0, half));
    held.push(conn);
  }
  await fullHost();
  const r = await post(server.baseUrl, tokens[4]!.token, body([smallSingle()]), { headers: { 'x-forwarded-for': '2001:db8:77:2::9' } });
  t.equal(r.status, 200, `a caller from another /64 is served (${r.status} ${r.json?.error?.message ?? ''})`);
  const revoked = await waitFor(() => held.find((c) => c.hasAnswer), { timeoutMs: 15_000, what: 'one upload of the /64 to be answered' });
  t.equal(held.filter((c) => c.hasAnswer).length, 1, 'only one upload gave way');
  const answer = await revoked.response();
  t.same([answer.status, answer.json?.error?.code], [503, 'server_busy'], 'the revoked upload of the /64 is answered 503 server_busy');
  t.match(answer.headers['retry-after'], /^\d+$/, 'with Retry-After');
  t.match(answer.json?.error?.message, /share/, 'the message says why: its caller holds more than its share');
  for (const conn of held) conn.close();
  await idleHost();
});
