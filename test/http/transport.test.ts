// Verify ingest over real HTTP, transport level: the 32 MiB body limit (declared and chunked),
// Content-Length and Content-Type checks, malformed multipart, the 1 MiB part and metadata
// limits, the part-count limit and the Idempotency-Key rules, each at its edge. Every rejected
// request charges nothing and leaves only its audit line.
// The service's app and engine in process (test/helpers/api.ts: the uWS app an API worker
// serves, composed by composeApiWorker, on a loopback port, over the real LMDB store; issue
// 43: this was a server start): the body limits, the multipart parser, the early answers and
// their closes are the app's, the same in every API worker. The store is read through the
// harness's own handle.

import t, { type Test } from 'tap';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { crop } from '../helpers/captures.ts';
import {
  BODY_LIMIT, PART_LIMIT, RawConn, auditRecords, body, expectCleanOrClosed, expectClosed, expectRejected, multipart, okFrame, pngOfSize, post, rawAnswer,
  requestOfSize, smallPng, smallSingle, snapshot, verifyHead, writeBody, writeChunked, type Answer, type RawResponse,
} from '../helpers/ingest.ts';

// 32 captures whose images are padded so that the whole body is exactly 32 MiB. Built before the
// server starts: building it blocks this thread for seconds, and a keep-alive connection of
// fetch's pool left idle across that block can be closed by the server's idle timer while the
// client cannot see it, so the next fetch on it fails ("other side closed").
const exact = requestOfSize(BODY_LIMIT, 32, (i) => (i === 0 ? crop(1) : crop(2)));

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());
const tok = await makeToken(server, ['rgb_liveness:10000:day', 'color_liveness:10000:day']);

// A client that stops after its head (and part of its body) and never sends its declared rest
// holds the connection only until the drain's bound (5 s) ends: then it gets its answer and
// the connection is closed. The stalled client is started here and checked by the last test,
// so that those 5 s pass while the others run. Its 401 is
// decided before a capacity slot is taken, so the stalled connection holds none. It sends
// its head and 64 KiB of the 8 MiB it declares, then waits for the answer without writing on:
// a writer racing the answer can get the whole body out first (seen on a loaded host), and a
// complete request is no stall.
const stalled = (async () => {
  const b = overLong(8);
  const head = verifyHead({ token: 'lvk_nope', contentType: b.contentType, contentLength: b.body.length });
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(Buffer.concat([Buffer.from(head), b.body.subarray(0, 64 * 1024)]));
  const answer = rawAnswer(await conn.response());
  return { conn, answer, unsent: b.body.length - (conn.bytesWritten - Buffer.byteLength(head)) };
})();
stalled.catch(() => undefined); // awaited, and failing, in its test
t.teardown(async () => (await stalled.catch(() => undefined))?.conn.close());

// A connection whose request got an early answer and whose body then arrived whole must not
// stay open. uWS (20.30 and 20.57) never times out a connection whose answer ended while a body
// handler was still attached, once the body's last chunk has come (reproduced with uWS alone:
// onData attached, end() before the last chunk, the rest sent after). So the service answers
// such a request once the body has come, and closes it (src/http/respond.ts). Three routes:
// verify, which holds the body while it reads the token; a JSON route; an unknown path.
// Started here and checked by the last test, like the stalled client.
const idleAfterEarly = Promise.all([
  ['verify, bad token', verifyHead({ token: 'lvk_nope', contentType: 'multipart/form-data; boundary=x', contentLength: 1000 }), Buffer.alloc(1000, 0x61)],
  ['sessions, bad token', 'POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer lvk_nope\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n', Buffer.from('{}')],
  ['unknown path', 'POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n', Buffer.alloc(1000, 0x61)],
].map(async ([label, head, rest]) => {
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(Buffer.concat([Buffer.from(head as string), rest as Buffer]));
  const answer = rawAnswer(await conn.response());
  return { label: label as string, conn, status: answer.status, closed: await conn.waitClosed(20_000) };
}));
idleAfterEarly.catch(() => undefined); // awaited, and failing, in its test
t.teardown(async () => { for (const c of (await idleAfterEarly.catch(() => [])) ?? []) c.conn.close(); });

/** Head, then a small body in the same write (so that it is all in the server's hands before an
 * early answer: no reset race), or a writer for big bodies; returns the answer and the still
 * open connection for the clean-or-closed check. */
async function raw(head: string, write?: Buffer | ((c: RawConn) => Promise<void>)): Promise<{ answer: Answer; conn: RawConn; writeError: string | null; bytesWritten: number }> {
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(Buffer.isBuffer(write) ? Buffer.concat([Buffer.from(head), write]) : head);
  const writing = typeof write === 'function' ? write(conn) : Promise.resolve();
  const r = await conn.response();
  await writing;
  return { answer: rawAnswer(r), conn, writeError: r.writeError, bytesWritten: r.bytesWritten };
}

// --- 32 MiB body ------------------------------------------------------------------------------


t.test('a body of exactly 32 MiB with Content-Length is accepted (200, 32 units)', async (t) => {
  t.equal(exact.body.length, BODY_LIMIT);
  const before = await snapshot(server, tok.token);
  const r = await post(server.baseUrl, tok.token, exact);
  t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
  t.equal(r.json?.charged_units, 32);
  t.equal(r.json?.results?.length, 32);
  const rgb = (u: any) => u.find((x: any) => x.module_id === 'rgb_liveness').used;
  const after = await snapshot(server, tok.token);
  t.equal(rgb(after.usage) - rgb(before.usage), 32, 'usage grew by 32');
});

t.test('a chunked body of exactly 32 MiB (no Content-Length) is accepted', async (t) => {
  const { answer, conn } = await raw(verifyHead({ token: tok.token, contentType: exact.contentType, chunked: true }), (c) => writeChunked(c, exact.body));
  t.equal(answer.status, 200, JSON.stringify(answer.json).slice(0, 300));
  t.equal(answer.json?.charged_units, 32);
  conn.close();
});

t.test('Content-Length 32 MiB + 1 is refused with 413 before a byte of the body is read', async (t) => {
  let conn: RawConn | undefined;
  let written = -1;
  const head = verifyHead({ token: tok.token, contentType: exact.contentType, contentLength: BODY_LIMIT + 1 });
  await expectRejected(t, server, tok, async () => {
    // no body at all: the answer can only come from the declared length
    const r = await raw(head);
    conn = r.conn;
    written = r.bytesWritten;
    return r.answer;
  }, { status: 413, code: 'payload_too_large' });
  t.equal(written, Buffer.byteLength(head), 'only the head was sent');
  // the client sends its body anyway: it is drained or the connection is closed, never misread
  await expectCleanOrClosed(t, conn!, Buffer.concat([exact.body, Buffer.from('x')]));
  conn!.close();
});

t.test('a chunked body of 32 MiB + 1 is refused with 413 and the connection is closed, not hung', async (t) => {
  // The exact 32 MiB request plus one epilogue byte: every limit but the body's still holds.
  const plus1 = Buffer.concat([exact.body, Buffer.from('x')]);
  let conn: RawConn | undefined;
  let writeError: string | null = null;
  const a = await expectRejected(t, server, tok, async () => {
    const r = await raw(verifyHead({ token: tok.token, contentType: exact.contentType, chunked: true }), (c) => writeChunked(c, plus1));
    conn = r.conn;
    writeError = r.writeError;
    return r.answer;
  }, { status: 413, code: 'payload_too_large' });
  t.match(a.json?.error?.message, /body/i, 'the body limit, not a part limit, refused it');
  t.ok(writeError === null || ['EPIPE', 'ECONNRESET'].includes(writeError), `write error tolerated: ${writeError}`);
  await expectCleanOrClosed(t, conn!);
  conn!.close();
});

t.test('the body limit is enforced in the chunk that crosses it, not at the end of the request', async (t) => {
  // 32 MiB + 1 of chunked data, then the client stalls without the terminating chunk: only a
  // limit checked as the bytes arrive can answer now.
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: exact.contentType, chunked: true }));
  for (let at = 0; at < exact.body.length; at += 256 * 1024) {
    const piece = exact.body.subarray(at, at + 256 * 1024);
    await conn.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
  }
  await conn.write('1\r\nx\r\n'); // byte 32 MiB + 1; no "0" chunk follows
  const r = await conn.response();
  t.equal(r.status, 413);
  t.equal(r.json?.error?.code, 'payload_too_large');
  t.match(r.json?.error?.message, /body/i);
  await expectCleanOrClosed(t, conn, Buffer.from('0\r\n\r\n'));
  conn.close();
});

t.test('the part limit is enforced while the part streams, not when it ends', async (t) => {
  // metadata, then an image part of which 1 MiB + 100 bytes are sent before the client stalls
  const b = body([smallSingle()]);
  const boundary = b.contentType.split('boundary=')[1]!;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n${JSON.stringify(b.metadata)}\r\n--${boundary}\r\nContent-Disposition: form-data; name="f0"; filename="f0.png"\r\n\r\n`);
  const partial = Buffer.concat([head, Buffer.alloc(PART_LIMIT + 100, 0x42)]);
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: partial.length + 4 * PART_LIMIT }));
  await writeBody(conn, partial, 64 * 1024);
  const r = await conn.response();
  t.equal(r.status, 413);
  t.equal(r.json?.error?.code, 'payload_too_large');
  t.match(r.json?.error?.message, /f0/);
  await expectCleanOrClosed(t, conn, Buffer.alloc(4 * PART_LIMIT, 0x42));
  conn.close();
});

// The service answers an over-long upload and closes while the client is still sending; the
// unread bytes make the close a TCP reset, and a reset can discard the answer before the client
// has read it. A lingering close (answer, shut down the write side, keep reading and discarding
// for a bounded time, then close) would deliver it every time.
const TODO_RST = 'bug: early answer + close while the client is still sending resets the connection, and the reset can discard the 413 before the client reads it';

/** An over-long upload (`mib` MiB of small unreferenced parts: no part or count limit trips
 * before the body limit). */
function overLong(mib: number) {
  const piece = Buffer.alloc(512 * 1024, 0x61);
  const parts: Parameters<typeof multipart>[0] = [{ name: 'metadata', data: JSON.stringify(body([smallSingle()]).metadata) }];
  for (let i = 0; i < 2 * mib; i++) parts.push({ name: `p${i}`, filename: 'x.bin', data: piece });
  return multipart(parts);
}

async function newAuditLines(since: Set<string>): Promise<any[]> {
  return (await auditRecords(server)).filter((x) => !since.has(x.request_id));
}

t.test('an endless chunked body is cut at 32 MiB: refused mid-stream, long before the client stops', async (t) => {
  // 96 MiB: whatever bounded amount the service drains after the limit, plus what socket
  // buffers hold, stays far below it
  const big = overLong(96);
  const before = await snapshot(server, tok.token);
  const seen = new Set((await auditRecords(server)).map((x) => x.request_id));
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: big.contentType, chunked: true }));
  await writeChunked(conn, big.body);
  let answer: Answer | null = null;
  try {
    answer = rawAnswer(await conn.response());
  } catch {
    answer = null;
  }
  await expectClosed(t, conn, 'the client never finished: the server closes the connection (not hung)');
  conn.close();
  t.ok(conn.bytesWritten < big.body.length, `the client could not send all ${big.body.length} bytes (sent ${conn.bytesWritten})`);
  t.ok(conn.writeError === null || ['EPIPE', 'ECONNRESET'].includes(conn.writeError), `write error tolerated: ${conn.writeError}`);
  // the answer itself is raced by the reset (see TODO_RST): checked when it arrived
  t.ok(answer, 'the 413 reached the client', answer ? {} : { todo: TODO_RST });
  if (answer) {
    t.equal(answer.status, 413);
    t.equal(answer.json?.error?.code, 'payload_too_large');
  }
  // the answer can leave before its audit line is committed: awaited, bounded
  const lines: any[] = await waitFor(async () => { const l = await newAuditLines(seen); return l.length > 0 ? l : null; }, { timeoutMs: 20_000, what: 'the audit line of the 413' }).catch(() => []);
  t.same(lines.map((x) => [x.status, x.error_code, x.charged_units]), [[413, 'payload_too_large', 0]], 'one audit line: 413, nothing charged');
  const after = await snapshot(server, tok.token);
  t.same(after, before, 'nothing charged or stored');
});

t.test('a client that reads only after writing its whole over-long body gets the 413', async (t) => {
  // Content-Length declared (answered at once), body sent anyway, answer read afterwards: the
  // way many simple clients work. Deterministic form of the reset race above.
  const big = overLong(40);
  const seen = new Set((await auditRecords(server)).map((x) => x.request_id));
  const conn = new RawConn(server.port, { readLater: true });
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: big.contentType, contentLength: big.body.length }));
  await writeBody(conn, big.body);
  let answer: Answer | null = null;
  try {
    answer = rawAnswer(await conn.response());
  } catch {
    answer = null;
  }
  t.equal(answer?.status, 413, 'the 413 reached the client', answer ? {} : { todo: TODO_RST });
  await expectCleanOrClosed(t, conn);
  conn.close();
  // the answer can leave before its audit line is committed (a refusal's line waits in the
  // worker's audit queue): awaited, bounded, as above; read at once it failed a quiet suite run
  const lines: any[] = await waitFor(async () => { const l = await newAuditLines(seen); return l.length > 0 ? l : null; }, { timeoutMs: 20_000, what: 'the audit line of the 413' }).catch(() => []);
  t.same(lines.map((x) => [x.status, x.error_code]), [[413, 'payload_too_large']], 'the service did answer 413 (audit line)');
});

// Answers decided from the head alone (401, 404, 400, 413 declared, 415; 503 in the capacity
// tests) reach a client that sends its body right away, as every ordinary HTTP client does.
// With a declared length the body is drained (read and dropped) and the answer goes out when it
// has arrived, with `Connection: close`, and the connection is closed: nothing is unread, so
// the close is no reset, and the connection cannot be left idle where uWS would never time it
// out (src/http/respond.ts, answerBeforeBodyEnd; security issue 40, item 2).
t.test('an answer decided from the head reaches a client that is already sending its body', async (t) => {
  const b = overLong(8);
  const cases: [string, Parameters<typeof verifyHead>[0], number, string, number][] = [
    ['415', { token: tok.token, contentType: 'application/json', contentLength: b.body.length }, 415, 'unsupported_media_type', b.body.length],
    ['400 Idempotency-Key', { token: tok.token, contentType: b.contentType, contentLength: b.body.length, extra: { 'Idempotency-Key': 'a b' } }, 400, 'invalid_idempotency_key', b.body.length],
    ['401', { token: 'lvk_nope', contentType: b.contentType, contentLength: b.body.length }, 401, 'invalid_token', b.body.length],
    ['404', { module: 'nope', token: tok.token, contentType: b.contentType, contentLength: b.body.length }, 404, 'module_not_found', b.body.length],
    ['413 declared', { token: tok.token, contentType: b.contentType, contentLength: BODY_LIMIT + 1 }, 413, 'payload_too_large', BODY_LIMIT + 1],
  ];
  for (const [label, head, status, code, size] of cases) {
    await t.test(label, async (t) => {
      const payload = size === b.body.length ? b.body : Buffer.concat([b.body, Buffer.alloc(size - b.body.length, 0x61)]);
      const headText = verifyHead(head);
      const conn = new RawConn(server.port);
      await conn.connected;
      await conn.write(headText);
      await writeBody(conn, payload);
      let r: RawResponse | null = null;
      try {
        r = await conn.response();
      } catch {
        r = null;
      }
      t.ok(r, `the ${status} reached the client`);
      if (r) t.same([r.status, r.json?.error?.code], [status, code]);
      t.equal(r?.headers['connection'], 'close', 'the answer says Connection: close');
      const sent = conn.bytesWritten - Buffer.byteLength(headText);
      t.equal(sent, payload.length, 'the answer came once the whole declared body was sent');
      t.equal(r?.writeError ?? null, null, 'no reset while the client wrote');
      t.equal(await expectCleanOrClosed(t, conn), 'closed', 'the server closes the connection after the answer');
      conn.close();
    });
  }
});

// uWS closes the connection after answering a request that said `Connection: close`; with the
// body's rest unread that close would be a reset that can destroy the answer in flight (seen
// with 28 MB uploads refused 503 by bench/uploads.ts --big). The rest is drained first.
t.test('an early answer reaches a client that sent Connection: close and is still sending a big body', async (t) => {
  const b = overLong(8);
  const cases: [string, Parameters<typeof verifyHead>[0], number, string][] = [
    ['401', { token: 'lvk_nope', contentType: b.contentType, contentLength: b.body.length, extra: { Connection: 'close' } }, 401, 'invalid_token'],
    ['415', { token: tok.token, contentType: 'application/json', contentLength: b.body.length, extra: { Connection: 'close' } }, 415, 'unsupported_media_type'],
  ];
  for (const [label, head, status, code] of cases) {
    await t.test(label, async (t) => {
      const conn = new RawConn(server.port);
      await conn.connected;
      await conn.write(verifyHead(head));
      await writeBody(conn, b.body);
      const r = await conn.response();
      t.equal(r.writeError, null, 'every byte of the body was accepted: no reset while the client wrote');
      const answer = rawAnswer(r);
      t.same([answer.status, answer.json?.error?.code], [status, code], `the ${status} reached the client`);
      await expectClosed(t, conn, 'the connection is closed after the answer, as the client asked');
      conn.close();
    });
  }
});

// --- Content-Length and Content-Type ------------------------------------------------------------

t.test('malformed Content-Length that reaches the service: 400 invalid_content_length', async (t) => {
  const b = body([smallSingle()]);
  for (const [label, extra] of [
    ['empty', { 'Content-Length': '' }],
    ['two different lengths', { 'Content-Length': String(b.body.length), 'content-length': String(b.body.length + 1) }],
  ] as const) {
    await t.test(label, async (t) => {
      let conn: RawConn | undefined;
      await expectRejected(t, server, tok, async () => {
        const r = await raw(verifyHead({ token: tok.token, contentType: b.contentType, extra }), b.body);
        conn = r.conn;
        return r.answer;
      }, { status: 400, code: 'invalid_content_length' });
      await expectCleanOrClosed(t, conn!);
      conn!.close();
    });
  }
});

/** Sends a verify head with a raw Content-Length value (and the body, when given), and checks
 * that the spec's answer comes and nothing is charged. `todo` marks the spec assertions that
 * uWS's own parser defeats today. */
async function lengthAnswered(t: Test, value: string, sendBody: boolean, want: { status: number; code: string }, todo: string): Promise<void> {
  const b = body([smallSingle()]);
  const before = await snapshot(server, tok.token);
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: value }));
  if (sendBody) await conn.write(b.body);
  let answer: Answer | null = null;
  try {
    answer = rawAnswer(await conn.response({ expectClose: true }));
  } catch {
    answer = null;
  }
  t.ok(answer !== null || conn.isClosed, 'the connection is answered or closed, never left hanging');
  conn.close();
  t.equal(answer?.status, want.status, `answered ${want.status}`, { todo });
  t.equal(answer?.json?.error?.code, want.code, `code ${want.code}`, { todo });
  t.same(await snapshot(server, tok.token), before, 'nothing charged or stored');
}

// uWS's own HTTP parser drops these before any handler runs: the client gets a closed
// connection and no answer at all, where the spec promises 400 invalid_content_length. The
// spec assertions carry `todo` (they run and show as "not ok # TODO") until that is fixed.
const TODO_CL = 'bug: uWS 20.30 closes the connection without any answer for a non-numeric Content-Length';
for (const value of ['abc', '-1', '12abc', '1.5', '+5']) {
  t.test(`malformed Content-Length ${JSON.stringify(value)}: 400 invalid_content_length`, (t) =>
    lengthAnswered(t, value, true, { status: 400, code: 'invalid_content_length' }, TODO_CL));
}

// uWS parses Content-Length into 32 bits: from 4 GiB - 1 up it drops the request before any
// handler runs, though the value is a well-formed length above the 32 MiB limit.
const TODO_HUGE = 'bug: uWS 20.30 closes the connection without any answer for a Content-Length of 4 GiB - 1 or more';
for (const value of ['4294967295', '4294967296', '12345678901234567']) {
  t.test(`Content-Length ${value}: 413 payload_too_large`, (t) => lengthAnswered(t, value, false, { status: 413, code: 'payload_too_large' }, TODO_HUGE));
}

t.test('anything but multipart/form-data with a boundary: 415 unsupported_media_type', async (t) => {
  const b = body([smallSingle()]);
  const boundary = b.contentType.split('boundary=')[1];
  for (const type of ['application/json', 'text/plain', 'application/x-www-form-urlencoded', `multipart/mixed; boundary=${boundary}`, 'multipart/form-data', 'image/png', null]) {
    await t.test(String(type), async (t) => {
      let conn: RawConn | undefined;
      await expectRejected(t, server, tok, async () => {
        const r = await raw(verifyHead({ token: tok.token, contentType: type, contentLength: b.body.length }), b.body);
        conn = r.conn;
        return r.answer;
      }, { status: 415, code: 'unsupported_media_type' });
      await expectCleanOrClosed(t, conn!);
      conn!.close();
    });
  }
});

t.test('a body that is not valid multipart: 422 invalid_input at the body', async (t) => {
  const good = body([smallSingle()]);
  const boundary = good.contentType.split('boundary=')[1]!;
  const truncated = good.body.subarray(0, good.body.length - 10); // no closing delimiter
  const junkAfterDelimiter = Buffer.concat([Buffer.from(`--${boundary}XYZ\r\n`), good.body]);
  for (const [label, bytes] of [['no closing delimiter', truncated], ['delimiter followed by junk', junkAfterDelimiter], ['not multipart at all', Buffer.from('{"protocol_version":1}')]] as const) {
    await t.test(label, async (t) => {
      const answer = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, { body: bytes, contentType: good.contentType }), { status: 422, code: 'invalid_input' });
      t.match(answer.json?.detail?.[0], { loc: ['body'], type: 'multipart_invalid' }, 'the detail points at the body');
    });
  }
});

// --- 1 MiB per part ------------------------------------------------------------------------------

t.test('an image part of exactly 1 MiB is accepted: a padded PNG verifies (200)', async (t) => {
  const png = pngOfSize(crop(5), PART_LIMIT);
  t.equal(png.length, PART_LIMIT);
  const r = await post(server.baseUrl, tok.token, body([smallSingle(undefined, png)]));
  t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
  t.equal(r.json?.results?.[0]?.status, 'ok');
});

t.test('an rgb8 image padded to exactly 1 MiB passes the size limit and fails as an image (422, not 413)', async (t) => {
  const a = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, body([{ mode: 'rgb_single', frames: [okFrame(0, new Uint8Array(PART_LIMIT))] }])), { status: 422, code: 'invalid_input' });
  t.equal(a.json?.detail?.length, 1);
  t.equal(a.json?.detail?.[0]?.type, 'rgb8_wrong_size');
  t.same(a.json?.detail?.[0]?.loc, ['body', 'metadata', 'frames', 0, 'image']);
});

t.test('an image part of 1 MiB + 1 is refused with 413', async (t) => {
  for (const [label, bytes] of [['png', pngOfSize(crop(6), PART_LIMIT + 1)], ['rgb8', new Uint8Array(PART_LIMIT + 1)]] as const) {
    await t.test(label, async (t) => {
      const a = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, body([{ mode: 'rgb_single', frames: [okFrame(0, bytes)] }])), { status: 413, code: 'payload_too_large' });
      t.match(a.json?.error?.message, /f0/, 'names the part');
    });
  }
});

/** A valid single-capture request whose metadata text is padded with trailing spaces to `size` bytes. */
function metadataOfSize(size: number) {
  const png = smallPng();
  const built = body([{ capture_id: 'meta-size', mode: 'rgb_single', frames: [okFrame(0, png)] }]);
  const json = JSON.stringify(built.metadata);
  const padded = json + ' '.repeat(size - Buffer.byteLength(json));
  return multipart([{ name: 'metadata', data: padded }, { name: 'f0', filename: 'f0.png', type: 'image/png', data: png }]);
}

t.test('a metadata field of exactly 1 MiB is accepted (200)', async (t) => {
  const r = await post(server.baseUrl, tok.token, metadataOfSize(PART_LIMIT));
  t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
});

t.test('a metadata field of 1 MiB + 1 is refused with 413', async (t) => {
  const a = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, metadataOfSize(PART_LIMIT + 1)), { status: 413, code: 'payload_too_large' });
  t.match(a.json?.error?.message, /metadata/);
});

t.test('part count: 257 parts pass the parser (422 for the unreferenced ones), 258 are 413', async (t) => {
  const meta = JSON.stringify(body([smallSingle()]).metadata);
  const parts = (files: number) => multipart([{ name: 'metadata', data: meta }, ...Array.from({ length: files }, (_, i) => ({ name: i === 0 ? 'f0' : `x${i}`, filename: 'a.png', data: i === 0 ? smallPng() : 'x' }))]);
  const ok = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, parts(256)), { status: 422, code: 'invalid_input' });
  t.equal(ok.json?.detail?.length, 255, 'one item per unreferenced part');
  t.ok(ok.json?.detail?.every((d: any) => d.type === 'part_unreferenced'));
  await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, parts(257)), { status: 413, code: 'payload_too_large' });
});

// --- Idempotency-Key -----------------------------------------------------------------------------

t.test('Idempotency-Key of 1 and of 200 printable ASCII characters is accepted', async (t) => {
  for (const key of ['k', '!'.repeat(1) + '~'.repeat(198) + 'Z']) {
    const r = await post(server.baseUrl, tok.token, body([smallSingle()]), { headers: { 'idempotency-key': key } });
    t.equal(r.status, 200, `length ${key.length}: ${JSON.stringify(r.json).slice(0, 200)}`);
  }
});

t.test('malformed Idempotency-Key: 400 invalid_idempotency_key, nothing charged', async (t) => {
  const cases: [string, Buffer][] = [
    ['empty', Buffer.from('')],
    ['201 characters', Buffer.from('k'.repeat(201))],
    ['a space inside', Buffer.from('two words')],
    ['a tab inside', Buffer.from('two\twords')],
    ['DEL inside', Buffer.from('a\x7fb', 'latin1')],
    ['non-ASCII inside (UTF-8)', Buffer.from('caf\u00e9-key', 'utf8')],
    ['non-ASCII inside (Latin-1 byte)', Buffer.from('caf\u00e9-key', 'latin1')],
  ];
  for (const [label, key] of cases) {
    await t.test(label, async (t) => {
      const b = body([smallSingle()]);
      const head = Buffer.concat([
        Buffer.from(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }).slice(0, -2)),
        Buffer.from('Idempotency-Key: '), key, Buffer.from('\r\n\r\n'),
      ]);
      await expectRejected(t, server, tok, async () => {
        const conn = new RawConn(server.port);
        await conn.connected;
        await conn.write(head);
        await writeBody(conn, b.body);
        const r = await conn.response();
        await expectCleanOrClosed(t, conn);
        conn.close();
        return rawAnswer(r);
      }, { status: 400, code: 'invalid_idempotency_key' });
    });
  }
});

// uWS trims header values with a signed-char whitespace test, so bytes >= 0x80 at either end
// of a value vanish before the service sees it: "café" arrives as "caf" and is accepted (and
// would replay or conflict with a request sent under the key "caf").
const TODO_KEY = 'bug: uWS strips non-ASCII bytes at the ends of header values, so the key arrives shortened and valid';
for (const [label, key] of [['non-ASCII last', Buffer.from('caf\u00e9', 'utf8')], ['non-ASCII first', Buffer.from('\u00e9clair', 'utf8')]] as const) {
  t.test(`malformed Idempotency-Key, ${label}: 400 invalid_idempotency_key`, async (t) => {
    const b = body([smallSingle()]);
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(Buffer.concat([
      Buffer.from(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }).slice(0, -2)),
      Buffer.from('Idempotency-Key: '), key, Buffer.from('\r\n\r\n'),
    ]));
    await writeBody(conn, b.body);
    const r = await conn.response();
    conn.close();
    t.equal(r.status, 400, `answered 400 (got ${r.status})`, { todo: TODO_KEY });
    t.equal(r.json?.error?.code, 'invalid_idempotency_key', 'code invalid_idempotency_key', { todo: TODO_KEY });
  });
}

t.test('a key refused with the request (4xx before reservation) stays unbound', async (t) => {
  const key = `unbound-${Date.now()}`;
  const bad = body([{ mode: 'rgb_single', frames: [{ ...okFrame(0), eyes_xy: [[360, 200], [280, 202]] }] }]);
  await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, bad, { headers: { 'idempotency-key': key } }), { status: 422, code: 'invalid_input' });
  const r = await post(server.baseUrl, tok.token, body([smallSingle()]), { headers: { 'idempotency-key': key } });
  t.equal(r.status, 200, 'the same key then serves a different, valid request');
});

t.test('a client that stalls after an early answer, its declared body unsent, is closed (not held)', async (t) => {
  const { conn, answer, unsent } = await stalled;
  t.same([answer.status, answer.json?.error?.code], [401, 'invalid_token'], 'the 401 reached the client');
  t.ok(unsent > 0, `the client stalled with ${unsent} declared bytes unsent`);
  await expectClosed(t, conn, 'the stalled connection is closed by the server');
  conn.close();
});

t.test('a connection after an early answer to a complete request is closed, not held', async (t) => {
  for (const c of await idleAfterEarly) {
    t.ok(c.status >= 400 && c.status < 500, `${c.label}: answered ${c.status}`);
    t.ok(c.closed, `${c.label}: the idle connection is closed, not held open for good`);
  }
});
