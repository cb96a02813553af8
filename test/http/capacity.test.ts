// Verify capacity over real HTTP: one API worker (WORKERS=1) gives the host two verify slots; the slot
// is taken before the body is read and held through upload, preparation and inference
// (TEST_INFERENCE_DELAY_MS keeps a call in inference); the next call gets 503 server_busy with
// Retry-After without its body being read; slots come back on every path (success, every kind
// of error, early answers mid-stream, a client that disconnects mid-upload).
// Both hosts are the service's app and engine in process (test/helpers/api.ts: one API worker,
// as WORKERS=1 had it; the file was two server starts).

import t, { type Test } from 'tap';
import { buildVerifyBody } from '../../src/client/index.ts';
import { metric as metricOf, slotsInUse as slotsInUseOf, slotsUntil as slotsUntilOf } from '../helpers/metrics.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  RawConn, auditOf, expectCleanOrClosed, auditRecords, body, expectRejected, multipart, okFrame, post, rawAnswer, smallPng, smallSingle,
  snapshot, verifyHead, writeBody, type Answer,
} from '../helpers/ingest.ts';

const DELAY_MS = 2000;
// `stallServer`: the same host with the shortest rate window (2 s, not the default 10 s), for
// the upload that stalls until the rate rule answers it; on `server` the stalled uploads must
// keep their slots for as long as the test needs them to.
const [server, stallServer] = await Promise.all([
  startApi({ engine: 'real', ready: true, env: { WORKERS: '1', TEST_INFERENCE_DELAY_MS: String(DELAY_MS) } }),
  startApi({ engine: 'real', ready: true, env: { WORKERS: '1', UPLOAD_RATE_WINDOW_SECONDS: '2' } }),
]);
t.teardown(() => Promise.all([server.stop(), stallServer.stop()]));
const [tok, stallTok] = await Promise.all([makeToken(server, ['rgb_liveness:10000:day']), makeToken(stallServer, ['rgb_liveness:10000:day'])]);

const metric = (name: string) => metricOf(server.baseUrl, name);
const slotsInUse = () => slotsInUseOf(server.baseUrl);
const slotsUntil = (pred: (n: number) => boolean, what: string) => slotsUntilOf(server.baseUrl, pred, what);

/** A call that sends its head and only half of its body, then stalls (the slow client). */
async function halfUpload(to = server, token = tok.token): Promise<RawConn> {
  const b = body([smallSingle()]);
  const conn = new RawConn(to.port);
  await conn.connected;
  await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: b.body.length }));
  await conn.write(b.body.subarray(0, Math.floor(b.body.length / 2)));
  return conn;
}

/** A call that is answered before it sends any body: only the head, with a declared length.
 * Then the client sends its body anyway and one more request: the connection must be clean or
 * closed, never hung. */
async function headOnly(t: Test): Promise<{ answer: Answer; retryAfter: string | undefined }> {
  const b = body([smallSingle()]);
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
  const r = await conn.response();
  await expectCleanOrClosed(t, conn, b.body);
  conn.close();
  return { answer: rawAnswer(r), retryAfter: r.headers['retry-after'] };
}

const valid = () => post(server.baseUrl, tok.token, body([smallSingle()]));

/** the token's units used (reserved or charged), as /v1/me shows them */
async function usedNow(): Promise<number> {
  return ((await snapshot(server, tok.token)).usage as { used: number }[]).reduce((sum, u) => sum + u.used, 0);
}

t.test('the gauge starts at zero', async (t) => {
  t.equal(await slotsInUse(), 0);
});

t.test('two calls in inference hold both slots; a third gets 503 server_busy with Retry-After before its body is read', async (t) => {
  const busyBefore = await metric('lv_verify_busy_total');
  const usedBefore = await usedNow();
  const a = valid();
  const b = valid();
  await slotsUntil((n) => n === 2, 'two calls in flight');
  // their reservations are answered before their commit, which the metering writer holds open
  // for a settlement (RESERVATION_HOLD_MS at most): the refused call's before-and-after snapshot
  // must not straddle that commit, or it reads the two calls' units as its own charge
  await waitFor(async () => (await usedNow()) === usedBefore + 2, { what: 'the two calls\' reservations to be committed' });
  let third: Awaited<ReturnType<typeof headOnly>> | undefined;
  await expectRejected(t, server, tok, async () => {
    third = await headOnly(t);
    return third.answer;
  }, { status: 503, code: 'server_busy' });
  t.match(third?.retryAfter, /^\d+$/, 'Retry-After in seconds');
  const [ra, rb] = await Promise.all([a, b]);
  t.equal(ra.status, 200, 'first call completes');
  t.equal(rb.status, 200, 'second call completes');
  t.equal(await metric('lv_verify_busy_total'), busyBefore + 1, 'the busy counter counted it');
  await slotsUntil((n) => n === 0, 'both calls finished');
});

t.test('a slow client that sent half its body holds a slot; when it disconnects, the slot comes back', async (t) => {
  const slow1 = await halfUpload();
  await slotsUntil((n) => n === 1, 'the slow client holding a slot');
  const slow2 = await halfUpload();
  await slotsUntil((n) => n === 2, 'two slow clients');
  t.notOk(slow1.hasAnswer || slow2.hasAnswer, 'the slow clients are still uploading, unanswered');

  const busy = await headOnly(t);
  t.equal(busy.answer.status, 503, 'a third call is refused while both uploads stall');
  t.equal(busy.answer.json?.error?.code, 'server_busy');

  // contract.md order of checks: token, module, grant come before capacity; headers and
  // content type after it
  const b = body([smallSingle()]);
  const order: [string, Parameters<typeof verifyHead>[0], number, string][] = [
    ['bad token', { token: 'lvk_not-a-token', contentType: b.contentType, contentLength: b.body.length }, 401, 'invalid_token'],
    ['unknown module', { module: 'face_liveness', token: tok.token, contentType: b.contentType, contentLength: b.body.length }, 404, 'module_not_found'],
    ['module not granted', { module: 'color_liveness', token: tok.token, contentType: b.contentType, contentLength: b.body.length }, 403, 'module_forbidden'],
    ['bad Idempotency-Key', { token: tok.token, contentType: b.contentType, contentLength: b.body.length, extra: { 'Idempotency-Key': 'a b' } }, 503, 'server_busy'],
    ['not multipart', { token: tok.token, contentType: 'application/json', contentLength: b.body.length }, 503, 'server_busy'],
    ['declared length too large', { token: tok.token, contentType: b.contentType, contentLength: 64 * 1024 * 1024 }, 503, 'server_busy'],
  ];
  for (const [label, head, status, code] of order) {
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead(head));
    const r = await conn.response();
    conn.close();
    t.same([r.status, r.json?.error?.code], [status, code], `while busy, ${label}: ${status} ${code}`);
  }

  const auditBefore = new Set((await auditRecords(server)).map((r) => r.request_id));
  slow1.close(); // disconnect mid-upload
  await slotsUntil((n) => n === 1, 'the disconnected upload to give its slot back');
  const r = await valid();
  t.equal(r.status, 200, 'a new call then succeeds');

  slow2.close();
  await slotsUntil((n) => n === 0, 'every slot back');
  // the aborted uploads charged nothing and left an audit line each (status 499); an audit
  // line is written after its slot is given back, so it is awaited (bounded)
  const abortedNow = async () => (await auditRecords(server)).filter((x) => !auditBefore.has(x.request_id) && x.status === 499);
  const aborted = await waitFor(async () => {
    const a = await abortedNow();
    return a.length >= 2 ? a : undefined;
  }, { what: 'an audit line for each aborted upload' }).catch(() => abortedNow());
  t.equal(aborted.length, 2, 'two aborted uploads audited as 499');
  for (const x of aborted) {
    t.equal(x.error_code, 'client_disconnected', 'a client disconnect is audited as such, not as a server fault');
  }
  const stored = await snapshot(server, tok.token);
  for (const name of ['ledger', 'reservations', 'idempotency', 'results'] as const) {
    t.notOk(aborted.some((x) => stored.dbs[name].includes(x.request_id)), `no ${name} record for the aborted uploads`);
  }
  t.ok(aborted.every((x) => x.charged_units === 0 && x.token_id === tok.id), 'nothing charged to the token');
});

t.test('a client that stalls mid-upload and never disconnects is answered 408 and loses its slot', async (t) => {
  const stalled = await halfUpload(stallServer, stallTok.token);
  await slotsUntilOf(stallServer.baseUrl, (n) => n === 1, 'the stalled upload holding a slot');
  // the minimum upload rate is judged over UPLOAD_RATE_WINDOW_SECONDS (2 s on this server); the
  // wait is bounded, not a speed check
  const r = await stalled.response({ answerWaitMs: 40_000 });
  t.equal(r.status, 408, 'answered, not reset');
  t.equal(r.json?.error?.code, 'request_timeout');
  await slotsUntilOf(stallServer.baseUrl, (n) => n === 0, 'the slot to come back');
  stalled.close();
  t.equal((await post(stallServer.baseUrl, stallTok.token, body([smallSingle()]))).status, 200, 'the slot serves the next call');
});

t.test('a slow client that finishes its upload is served normally (the slot covered the whole upload)', async (t) => {
  const b = body([smallSingle()]);
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
  await conn.write(b.body.subarray(0, 100));
  await slotsUntil((n) => n === 1, 'the upload holding a slot');
  await writeBody(conn, b.body.subarray(100), 97);
  const r = await conn.response();
  conn.close();
  t.equal(r.status, 200, `served after a trickled upload (${r.body.slice(0, 120)})`);
  await slotsUntil((n) => n === 0, 'slot released after the answer');
});

t.test('slots come back after every kind of error: ten rejected calls in a row, then two concurrent calls both pass', async (t) => {
  const b = body([smallSingle()]);
  const boundary = b.contentType.split('boundary=')[1]!;
  const png = smallPng();
  const rejected: [string, () => Promise<Answer>, number][] = [
    ['400 invalid_idempotency_key', () => post(server.baseUrl, tok.token, b, { headers: { 'idempotency-key': 'has space' } }), 400],
    ['400 invalid_content_length', async () => {
      const conn = new RawConn(server.port);
      await conn.connected;
      await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, extra: { 'Content-Length': '' } }));
      const r = await conn.response();
      conn.close();
      return rawAnswer(r);
    }, 400],
    ['415 unsupported_media_type', () => post(server.baseUrl, tok.token, { body: b.body, contentType: 'application/json' }), 415],
    ['413 declared length', async () => {
      const conn = new RawConn(server.port);
      await conn.connected;
      await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: 64 * 1024 * 1024 }));
      const r = await conn.response();
      conn.close();
      return rawAnswer(r);
    }, 413],
    ['413 part too large, mid-stream', () => post(server.baseUrl, tok.token, body([{ mode: 'rgb_single', frames: [okFrame(0, new Uint8Array(1024 * 1024 + 1))] }])), 413],
    ['413 too many captures, mid-stream', () => post(server.baseUrl, tok.token, body(Array.from({ length: 33 }, () => smallSingle()), { batch: true })), 413],
    ['422 bad metadata, mid-stream', () => post(server.baseUrl, tok.token, multipart([{ name: 'metadata', data: '{"protocol_version":2' }, { name: 'f0', filename: 'a.png', data: png }])), 422],
    ['422 after the body (hash mismatch)', () => {
      const files = new Map(b.files);
      files.set('f0', Buffer.concat([png, Buffer.from('x')]));
      return post(server.baseUrl, tok.token, buildVerifyBody(b.metadata as never, files));
    }, 422],
    ['422 malformed multipart', () => post(server.baseUrl, tok.token, { body: b.body.subarray(0, b.body.length - 8), contentType: `multipart/form-data; boundary=${boundary}` }), 422],
    ['422 missing metadata', () => post(server.baseUrl, tok.token, multipart([{ name: 'f0', filename: 'a.png', data: png }])), 422],
  ];
  for (const [label, send, status] of rejected) {
    const r = await send();
    t.equal(r.status, status, label);
    t.ok(r.requestId && (await auditOf(server, r.requestId))?.status === status, `${label}: audited`);
  }
  await slotsUntil((n) => n === 0, 'no slot leaked by the errors');
  t.equal(await slotsInUse(), 0, 'the gauge is back at zero');
  const [x, y] = await Promise.all([valid(), valid()]);
  t.equal(x.status, 200, 'first concurrent call passes');
  t.equal(y.status, 200, 'second concurrent call passes: both slots were free');
});
