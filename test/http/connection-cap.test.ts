// Connections a client can make the service hold (security issue 40, item 2; issue 44 section 3).
//
// uWebSockets.js (20.30 and 20.57 alike) never times out a connection whose answer ended while
// the request body was still arriving, once that body has come: 1,000 connections from one
// address, each answered 401 and then sending its declared body, all stayed open. The service
// now answers such a request once the body has been drained, with `Connection: close`, and
// counts the connections it holds for a request per client address (CONNECTIONS_PER_ADDRESS,
// per API worker; src/http/connections.ts). Here, with the real server and store:
//   - 1,000 connections from one address that send a verify head with a bad token and then
//     their declared body, and never close: every one gets its answer with `Connection: close`
//     and is closed by the server; the server ends with no connection of theirs;
//   - 1,000 connections from one address that each trickle a body the service waits for (a
//     login): the server holds at most WORKERS x CONNECTIONS_PER_ADDRESS of them (the rest are
//     refused 503 and closed at once) until uWS's timer closes them;
//   - a client that sends its head and waits for the answer before sending its body gets it at
//     once, with the close (nothing unread, so no reset);
//   - meanwhile a client on another address is served 200 on every call;
//   - behind a trusted proxy the cap counts the client named in X-Forwarded-For, not the proxy;
//   - keep-alive clients in a burst past the host's slots: every answer after which the server
//     closes says `Connection: close`, and a connection answered without it serves the next
//     request (no reset).
// Open connections are counted from the server process's own file descriptors (its TCP sockets
// on the service port, through /proc): no fixed sleeps, every wait is for an event, bounded.

import fs from 'node:fs';
import net from 'node:net';
import t from 'tap';
import { makeToken, startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { RawConn, body, post, smallSingle, verifyHead } from '../helpers/ingest.ts';

const WORKERS = 2;
const CAP = 8;
/** Less than the shortest time uWS holds a request in progress before its timer closes it
 * (HTTP idle timeout 10 s on 20.30, 30 s on 20.57, checked on a 4 s tick, so never under 8 s
 * from the head; the margin for clock reading): a lower bound, which load only lengthens. */
const MIN_HOLD_MS = 5_000;
const ATTACKERS = 1000;
const server = await startServer({
  ready: true,
  env: {
    WORKERS: String(WORKERS),
    CONNECTIONS_PER_ADDRESS: String(CAP),
    TRUSTED_PROXIES: '127.0.0.1',
  },
});
t.teardown(() => server.stop());
const tok = await makeToken(server, ['rgb_liveness:100000:day']);
const good = body([smallSingle()]);
const uws: string = server.logLines().find((l) => l.msg === 'listening')?.uws ?? '';

// Header names with `_ . ! # $ % & ' * + ^` (valid HTTP tokens): uWS 20.30's parser gives such a
// request no answer and leaves the connection to its idle timer (about 12 s); 20.57 answers it
// (docs/endpoints.md, "Known limitations of the HTTP parser"). Started here, checked below, so
// the 12 s pass while the other tests run. What holds on either build: the connection is
// answered or closed by the server, never held; nginx (deploy/) drops such names before they
// reach the service (test/deploy/nginx.test.ts).
// Likewise a header value holding a control character other than TAB (review3 F4: NUL, 0x01,
// ESC, 0x1F were seen held until the timer; DEL and TAB are answered).
const ODD_NAMES = ['a_b', 'a.b', 'a!b', 'a#b', 'a$b', 'a%b', 'a&b', "a'b", 'a*b', 'a+b', 'a^b'];
const ODD_LINES = [...ODD_NAMES.map((name) => `${name}: 1`), ...['\u0000', '\u0001', '\u001b[2J', '\u001f'].map((c) => `User-Agent: x${c}y`)];
const oddHeaders = Promise.all(ODD_LINES.map((name) => new Promise<{ name: string; status: number; closed: boolean }>((resolve) => {
  const c = net.connect(server.port, '127.0.0.1');
  let buf = '';
  const done = (closed: boolean) => {
    clearTimeout(timer);
    c.destroy();
    resolve({ name, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(buf)?.[1] ?? 0), closed });
  };
  const timer = setTimeout(() => done(false), 60_000);
  c.on('connect', () => c.write(`GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n${name}\r\n\r\n`));
  c.on('data', (d) => {
    buf += d.toString('latin1');
    if (buf.includes('\r\n\r\n')) done(false);
  });
  c.on('error', () => {});
  c.on('close', () => done(true));
})));

/** The server process's open TCP connections on the service port (listening sockets excluded):
 * socket inodes among its file descriptors, matched against the kernel's TCP tables. */
function serverConnections(): number {
  const pid = server.proc.pid!;
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed while listed
    }
  }
  const port = server.port.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  for (const table of ['tcp', 'tcp6']) {
    for (const line of fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local address, remote address, state (0A = LISTEN), ..., inode
      if (f.length < 10 || f[3] === '0A' || !f[1]!.endsWith(`:${port}`)) continue;
      if (inodes.has(f[9]!)) n++;
    }
  }
  return n;
}

interface Outcome {
  status: number;
  connectionClose: boolean;
  /** the server closed the connection (the client never closes it) */
  closedByServer: boolean;
  /** ms from the answer to the server's close */
  closeAfterMs: number;
  /** ms from sending the head to the answer */
  answerAfterMs: number;
  /** Date.now() when the client saw the close (0: not closed by the server) */
  closedAt: number;
  /** ms from sending the head to the close (-1: not closed by the server) */
  openMs: number;
  /** the socket error's code, if one came (a reset) */
  error: string;
}

/** One hostile connection from `localAddress`: a verify head with a bad token declaring a
 * 1000-byte body, then the body (`wait`: nothing). `trickle`: a login instead, whose declared
 * 1000-byte JSON body comes 10 bytes every 50 ms and never ends (the service waits for it:
 * a request in progress, until uWS's timer closes it). It reads the answer and never closes.
 * Resolves when the server closes it, or after `boundMs` (then closedByServer is false). */
function hostile(localAddress: string, opts: { trickle?: boolean; wait?: boolean; forwardedFor?: string; boundMs: number; onClose?: () => void }): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: server.port, localAddress });
    let buf = '';
    let answeredAt = 0;
    let out: Outcome = { status: 0, connectionClose: false, closedByServer: false, closeAfterMs: -1, answerAfterMs: -1, closedAt: 0, openMs: -1, error: '' };
    let error = '';
    let sentAt = 0;
    let trickle: NodeJS.Timeout | null = null;
    const extra: Record<string, string> = opts.forwardedFor ? { 'X-Forwarded-For': opts.forwardedFor } : {};
    const timer = setTimeout(() => {
      if (trickle) clearInterval(trickle);
      socket.destroy();
      resolve(out);
    }, opts.boundMs);
    socket.on('connect', () => {
      sentAt = Date.now();
      if (opts.trickle) {
        const xff = opts.forwardedFor ? `X-Forwarded-For: ${opts.forwardedFor}\r\n` : '';
        socket.write(`POST /auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n${xff}\r\n`);
        let sent = 0;
        trickle = setInterval(() => {
          if (buf === '' && !socket.destroyed && sent < 990) socket.write(Buffer.alloc(10, 0x20));
          sent += 10;
        }, 50);
        return;
      }
      socket.write(verifyHead({ token: 'lvk_nope', contentType: 'multipart/form-data; boundary=x', contentLength: 1000, extra }));
      // a separate write after the head: the body arrives after the handler has started
      if (!opts.wait) setImmediate(() => socket.write(Buffer.alloc(1000, 0x61)));
    });
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      const head = buf.indexOf('\r\n\r\n');
      if (answeredAt === 0 && head >= 0) {
        answeredAt = Date.now();
        const lines = buf.slice(0, head).split('\r\n');
        out = { ...out, status: Number(lines[0]!.split(' ')[1]), connectionClose: lines.some((l) => /^connection:\s*close$/i.test(l)), answerAfterMs: answeredAt - sentAt };
      }
    });
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => {
      clearTimeout(timer);
      if (trickle) clearInterval(trickle);
      opts.onClose?.();
      resolve({ ...out, closedByServer: true, closeAfterMs: answeredAt ? Date.now() - answeredAt : -1, closedAt: Date.now(), openMs: sentAt ? Date.now() - sentAt : -1, error });
    });
  });
}

/** A request the server held until uWS's timer closed it: no answer, no reset, and closed no
 * sooner than MIN_HOLD_MS after its head was sent. A refused connection whose 503 the client
 * never read (the server's close reset it while the trickle still wrote: EPIPE, and the
 * answer in the socket was dropped with it; seen under load) is closed at once, not held. */
const wasHeld = (o: Outcome) => o.status !== 503 && o.error === '' && (o.openMs < 0 || o.openMs >= MIN_HOLD_MS);

/** How many of one address's requests may have been held in all, from `startedAt` (before the
 * first connect) to the last held one's close: each of the host's WORKERS x CAP places for the
 * address holds one request at a time, for at least MIN_HOLD_MS (until uWS's timer), and every
 * request was admitted after `startedAt` and at least MIN_HOLD_MS before its close; so at most
 * WORKERS x CAP x floor(span / MIN_HOLD_MS). A slow host only lengthens the span: the bound holds
 * under any load (a fixed 2 x WORKERS x CAP failed at 112 in a loaded suite run, the places
 * turning over while the 1,000 were still arriving). With the cap broken nearly all are held:
 * for 1,000 the bound would need a span over 5 minutes (1,000 / 16 x 5 s), past this file's
 * 2-minute bound on each connection. */
function heldBound(held: Outcome[], startedAt: number): { bound: number; span: number } {
  const span = Math.max(startedAt, ...held.map((o) => o.closedAt)) - startedAt;
  return { bound: WORKERS * CAP * Math.max(1, Math.floor(span / MIN_HOLD_MS)), span };
}

/** An honest client on another address calling in sequence until `until` settles. */
async function honest(until: Promise<unknown>): Promise<number[]> {
  let over = false;
  void until.finally(() => (over = true));
  const statuses: number[] = [];
  while (!over || statuses.length < 3) {
    statuses.push((await post(server.baseUrl, tok.token, good)).status);
    if (statuses.length >= 200) break;
  }
  return statuses;
}

t.test(`${ATTACKERS} connections from one address, each answered early and then sending its body, are all closed`, async (t) => {
  const baseline = serverConnections();
  const attack = Promise.all(Array.from({ length: ATTACKERS }, () => hostile('127.0.0.2', { boundMs: 120_000 })));
  const served = honest(attack);
  const outcomes = await attack;
  const byStatus = new Map<number, number>();
  for (const o of outcomes) byStatus.set(o.status, (byStatus.get(o.status) ?? 0) + 1);
  t.comment(`answers: ${JSON.stringify([...byStatus])}; slowest close after its answer: ${Math.max(...outcomes.map((o) => o.closeAfterMs))} ms`);
  t.equal(outcomes.filter((o) => o.status === 401 || o.status === 503).length, ATTACKERS, 'every connection was answered 401 (or 503 past the cap)');
  t.equal(outcomes.filter((o) => o.connectionClose).length, ATTACKERS, 'every answer said Connection: close');
  t.equal(outcomes.filter((o) => o.closedByServer).length, ATTACKERS, 'the server closed every connection (before: all were open after 30 s)');
  const statuses = await served;
  t.ok(statuses.length >= 3 && statuses.every((s) => s === 200), `the client on another address was served 200 on all ${statuses.length} calls`, { statuses });
  const left = await waitFor(() => serverConnections() <= baseline && 'drained', { timeoutMs: 20_000, what: 'the server to hold no more connections than before' });
  t.equal(left, 'drained', 'the server holds no more connections than before the attack');
});

t.test(`${ATTACKERS} trickling connections from one address: the server holds at most WORKERS x CONNECTIONS_PER_ADDRESS`, async (t) => {
  const baseline = serverConnections();
  const startedAt = Date.now();
  let closed = 0;
  const attack = Promise.all(Array.from({ length: ATTACKERS }, () => hostile('127.0.0.2', { trickle: true, boundMs: 120_000, onClose: () => closed++ })));
  const served = honest(attack);
  // Once all but WORKERS x CAP of them have been closed, the server must hold no more than
  // those: the others were refused and closed as they came, not held. (The held ones last
  // until uWS's timer, about 12 s on 20.30 and 32 s on 20.57, so they are still held here
  // unless the host was very slow: the bound holds either way.)
  await waitFor(() => closed >= ATTACKERS - WORKERS * CAP, { timeoutMs: 100_000, what: 'the refused connections to be closed' });
  const held = serverConnections() - baseline;
  const outcomes = await attack;
  const refused = outcomes.filter((o) => o.status === 503);
  const heldOnes = outcomes.filter(wasHeld);
  t.comment(`${refused.length} refused at once, ${heldOnes.length} held until uWS closed them; connections the server held once the refused were closed: ${held}`);
  t.ok(heldOnes.length >= 1, 'some were held');
  const { bound, span } = heldBound(heldOnes, startedAt);
  const lost = outcomes.filter((o) => o.status !== 503 && !wasHeld(o));
  t.comment(`refused without their 503 reaching the client (reset while it wrote, or closed too soon to have been held): ${lost.length}${lost.length ? `, e.g. ${JSON.stringify(lost[0])}` : ''}`);
  const shortest = Math.min(...heldOnes.map((o) => o.closedAt - startedAt));
  t.ok(heldOnes.length <= bound, `the held ones are few: ${heldOnes.length}, at most ${bound} over ${span} ms (the first closed ${shortest} ms after the attack began), not ${ATTACKERS}`);
  // + 4: the honest client's keep-alive connections, and answered ones whose close is in flight
  t.ok(held <= WORKERS * CAP + 4, `the server held at most ${WORKERS * CAP} (+ the honest client's): ${held}`);
  t.equal(outcomes.filter((o) => o.closedByServer).length, ATTACKERS, 'every one was closed by the server');
  t.ok(refused.every((o) => o.connectionClose), 'every refusal said Connection: close');
  const statuses = await served;
  t.ok(statuses.every((s) => s === 200), `the client on another address was served 200 on all ${statuses.length} calls`, { statuses });
  await waitFor(() => serverConnections() <= baseline, { timeoutMs: 20_000, what: 'the server to hold no more connections than before' });
});

t.test('a client that waits for the answer before sending its body is answered at once, and the connection closed', async (t) => {
  const outcomes = await Promise.all(Array.from({ length: 4 }, () => hostile('127.0.0.3', { wait: true, boundMs: 60_000 })));
  t.same(outcomes.map((o) => [o.status, o.connectionClose, o.closedByServer]), Array(4).fill([401, true, true]), '401 with Connection: close, then closed by the server');
  // not a speed check: an answer that waited for the body would come only when the drain's
  // 5 s bound ran out
  t.ok(outcomes.every((o) => o.answerAfterMs >= 0 && o.answerAfterMs < 5000), `answered without waiting for the body (${outcomes.map((o) => o.answerAfterMs).join(', ')} ms)`);
});

t.test("header names with `_ . ! # $ % & ' * + ^`, and control characters in a header value: answered (20.57) or closed by the server (20.30), never held", async (t) => {
  const results = await oddHeaders;
  t.comment(`served by ${uws}`);
  for (const r of results) {
    if (uws.includes('@20.30')) t.same([r.status, r.closed], [0, true], `${JSON.stringify(r.name)}: no answer on 20.30, and the connection closed by uWS's idle timer`);
    else if (ODD_NAMES.some((name) => r.name.startsWith(`${name}:`))) t.equal(r.status, 200, `${r.name}: answered`);
    else t.ok(r.status > 0 || r.closed, `${JSON.stringify(r.name)}: answered or closed`);
  }
});

t.test('a request that says Connection: close gets it back, and the close', async (t) => {
  for (const [label, head] of [
    ['GET', 'GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'],
    ['early 401 with its body', `${verifyHead({ token: 'lvk_nope', contentType: 'multipart/form-data; boundary=x', contentLength: 10, extra: { Connection: 'close' } })}0123456789`],
  ] as const) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(head);
    const r = await conn.response({ expectClose: true });
    t.equal(r.headers['connection'], 'close', `${label}: Connection: close in the answer (${r.status})`);
    t.ok(r.closed, `${label}: and the connection closed`);
    conn.close();
  }
});

t.test('behind a trusted proxy the cap counts the forwarded client, not the proxy', async (t) => {
  // 3 x WORKERS x CAP trickling logins through the proxy (127.0.0.1, trusted) for one client: past
  // WORKERS x CAP some are refused; another client through the same proxy is served
  const startedAt = Date.now();
  const stalled = Promise.all(Array.from({ length: 3 * WORKERS * CAP }, () => hostile('127.0.0.1', { trickle: true, forwardedFor: '203.0.113.7', boundMs: 60_000 })));
  const other = await post(server.baseUrl, tok.token, good, { headers: { 'x-forwarded-for': '203.0.113.8' } });
  t.equal(other.status, 200, 'another client through the same proxy is served');
  const outcomes = await stalled;
  t.ok(outcomes.filter((o) => o.status === 503).length >= CAP, 'the forwarded client past its cap is refused 503');
  // (held at once: at most WORKERS x CAP; in all, over the span: heldBound)
  const held = outcomes.filter(wasHeld);
  const { bound, span } = heldBound(held, startedAt);
  t.ok(held.length <= bound, `at most WORKERS x CAP of its requests were held at once: ${held.length} held over ${span} ms, at most ${bound}`);
});

t.test('a keep-alive burst past the slots: every closing answer says Connection: close, every other keeps serving', async (t) => {
  // 12 keep-alive connections x 6 calls on 4 slots: some calls are refused 503 while their
  // body is still arriving (answered after it, and closed), others answered 200 keep the
  // connection; a connection answered without Connection: close must serve the next call
  const CONNS = 12;
  const CALLS = 6;
  let closingAnswers = 0;
  let reused = 0;
  const broken: string[] = [];
  await Promise.all(Array.from({ length: CONNS }, async (_, c) => {
    let conn = new RawConn(server.port);
    await conn.connected;
    for (let i = 0; i < CALLS; i++) {
      await conn.write(verifyHead({ token: tok.token, contentType: good.contentType, contentLength: good.body.length }));
      await conn.write(Buffer.from(good.body));
      let r;
      try {
        r = await conn.response();
      } catch (e) {
        broken.push(`conn ${c} call ${i}: no answer (${(e as Error).message})`);
        break;
      }
      if (r.status !== 200 && r.status !== 503) broken.push(`conn ${c} call ${i}: ${r.status}`);
      if (/close/i.test(r.headers['connection'] ?? '')) {
        closingAnswers++;
        if (!(await conn.waitClosed(20_000))) broken.push(`conn ${c} call ${i}: Connection: close but not closed`);
        conn.close();
        conn = new RawConn(server.port);
        await conn.connected;
      } else if (i > 0) reused++;
    }
    conn.close();
  }));
  t.comment(`${closingAnswers} answers closed their connection; ${reused} calls reused a kept-alive one`);
  t.same(broken, [], 'no call was reset, left unanswered or answered otherwise');
});
