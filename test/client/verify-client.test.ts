import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { buildCaptureWith, createVerifyClient, parseRetryAfter, backoffDelay, isRetryable, type VerifyClientOptions } from '../../client/src/index.ts';

interface Scripted {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** drop the connection without answering */
  destroy?: boolean;
  /** send the head and half the body, then drop the connection */
  truncate?: boolean;
}

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodySha: string;
}

/** A stand-in for the service: answers from a script, records what every attempt sent. */
async function fakeService(t: Test, script: Scripted[]) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, bodySha: createHash('sha256').update(Buffer.concat(chunks)).digest('hex') });
      const step = script[Math.min(seen.length - 1, script.length - 1)];
      if (step.destroy) {
        req.socket.destroy();
        return;
      }
      const text = typeof step.body === 'string' ? step.body : JSON.stringify(step.body ?? {});
      res.writeHead(step.status, { 'content-type': 'application/json', 'x-request-id': `req-${seen.length}`, 'content-length': String(Buffer.byteLength(text)), ...step.headers });
      if (step.truncate) {
        res.write(text.slice(0, text.length >> 1), () => req.socket.destroy());
        return;
      }
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}`, seen };
}


const err = (code: string, message = code) => ({ error: { code, message }, request_id: 'r' });
const result = (capture_id: string, status: 'ok' | 'retry', alive: boolean | null, reason: string | null = null) => ({
  capture_id, mode: 'rgb_single', status, alive, score: alive === null ? null : alive ? 0.9 : 0.1, reason,
  final_window_frames: 0, window_frame_indices: [], reset_events: [], single_score: 0.9, temporal_logit: null,
  color_logits: null, model_set: 'raw_v1', decision_policy: 'single_frame_v1', threshold: 0.5, min_final_frames: null,
});
const okBody = (...results: unknown[]) => ({ request_id: 'r1', module_id: 'rgb_liveness', charged_units: results.length, results, usage: [] });

const packet = () => buildCaptureWith({
  mode: 'rgb_single', capture_id: 'cap-1',
  frames: [{ timestamp_us: 1, source_size: [640, 480], eyes_xy: [[300, 200], [340, 200]], image: { bytes: new Uint8Array(307200).fill(1) } }],
}, (b) => createHash('sha256').update(b).digest('hex'));

function client(baseUrl: string, extra: Partial<VerifyClientOptions> = {}) {
  const delays: number[] = [];
  const c = createVerifyClient({
    baseUrl, token: 'lvk_test', maxAttempts: 4, baseDelayMs: 100, maxDelayMs: 1000, random: () => 0.5,
    sleep: async (ms) => { delays.push(ms); },
    ...extra,
  });
  return { c, delays };
}

t.test('a verdict is status plus alive per capture, with the request facts', async (t) => {
  const svc = await fakeService(t, [{ status: 200, body: okBody(result('a', 'ok', true), result('b', 'ok', false), result('c', 'retry', null, 'incomplete_capture')) }]);
  const { c } = client(svc.baseUrl);
  const { metadata, files } = packet();
  const out = await c.verify('rgb_liveness', metadata, files, { idempotencyKey: 'key-1' });
  t.equal(out.kind, 'completed');
  if (out.kind !== 'completed') return;
  t.same(out.verdicts, [
    { capture_id: 'a', verdict: 'live', reason: null },
    { capture_id: 'b', verdict: 'not_live', reason: null },
    { capture_id: 'c', verdict: 'retry', reason: 'incomplete_capture' },
  ]);
  t.equal(out.replayed, false);
  t.equal(out.requestId, 'req-1');
  t.equal(out.idempotencyKey, 'key-1');
  const [req] = svc.seen;
  t.equal(req.method, 'POST');
  t.equal(req.url, '/v1/modules/rgb_liveness/verify');
  t.equal(req.headers.authorization, 'Bearer lvk_test');
  t.equal(req.headers['idempotency-key'], 'key-1');
  t.match(req.headers['content-type'], /^multipart\/form-data; boundary=/);
});

t.test('a replay is reported as such', async (t) => {
  const svc = await fakeService(t, [{ status: 200, body: okBody(result('a', 'ok', true)), headers: { 'idempotency-replayed': 'true' } }]);
  const out = await client(svc.baseUrl).c.verify('rgb_liveness', packet().metadata, packet().files);
  t.equal(out.kind === 'completed' && out.replayed, true);
});

t.test('server_busy, module_unavailable, request_in_progress, inference_failed, internal_error are retried with the same key and bytes', async (t) => {
  const svc = await fakeService(t, [
    { status: 503, body: err('server_busy'), headers: { 'retry-after': '2' } },
    { status: 409, body: err('request_in_progress'), headers: { 'retry-after': '1' } },
    { status: 500, body: err('inference_failed') },
    { status: 200, body: okBody(result('cap-1', 'ok', true)) },
  ]);
  const { c, delays } = client(svc.baseUrl);
  const { metadata, files } = packet();
  const out = await c.verify('rgb_liveness', metadata, files);
  t.equal(out.kind, 'completed');
  t.equal(out.attempts, 4);
  // Retry-After in seconds when given; else full jitter: 0.5 * min(1000, 100 * 2^(3-1)) = 200.
  t.same(delays, [2000, 1000, 200]);
  const keys = new Set(svc.seen.map((s) => s.headers['idempotency-key']));
  t.equal(keys.size, 1, 'one key for every attempt');
  t.match([...keys][0], /^[0-9a-f-]{36}$/, 'a UUID was generated');
  t.equal(new Set(svc.seen.map((s) => s.bodySha)).size, 1, 'byte-identical bodies');
  t.equal(new Set(svc.seen.map((s) => s.headers['content-type'])).size, 1, 'same boundary');
});

t.test('module_unavailable, request_timeout and internal_error are retried too; a network failure is retried', async (t) => {
  const svc = await fakeService(t, [
    { status: 503, body: err('module_unavailable') },
    { status: 0, destroy: true },
    { status: 408, body: err('request_timeout') },
    { status: 500, body: err('internal_error') },
    { status: 200, body: okBody(result('cap-1', 'ok', false)) },
  ]);
  const { c, delays } = client(svc.baseUrl, { maxAttempts: 5 });
  const out = await c.verify('rgb_liveness', packet().metadata, packet().files, { idempotencyKey: 'k' });
  t.equal(out.kind, 'completed');
  t.same(out.kind === 'completed' && out.verdicts.map((v) => v.verdict), ['not_live']);
  t.same(delays, [50, 100, 200, 400], 'backoff doubles: 0.5 * 100, 0.5 * 200, 0.5 * 400, 0.5 * 800');
  t.equal(svc.seen.length, 5);
  t.equal(new Set(svc.seen.map((s) => s.bodySha)).size, 1);
});

t.test('an answer cut off in its body is a network failure, retried with the same key and bytes; reads say network_error', async (t) => {
  const svc = await fakeService(t, [
    { status: 200, body: okBody(result('cap-1', 'ok', true)), truncate: true },
    { status: 503, body: err('server_busy'), headers: { 'retry-after': '1' }, truncate: true },
    { status: 200, body: okBody(result('cap-1', 'ok', true)), headers: { 'idempotency-replayed': 'true' } },
  ]);
  const { c, delays } = client(svc.baseUrl);
  const out = await c.verify('rgb_liveness', packet().metadata, packet().files, { idempotencyKey: 'k-cut' });
  t.equal(out.kind, 'completed', 'it threw (TypeError: terminated) out of verify(), which promises an outcome');
  t.same(out.kind === 'completed' && out.verdicts.map((v) => v.verdict), ['live']);
  t.equal(svc.seen.length, 3);
  t.same(svc.seen.map((s) => s.headers['idempotency-key']), ['k-cut', 'k-cut', 'k-cut'], 'the same key: the service replays the answer it saved');
  t.equal(new Set(svc.seen.map((s) => s.bodySha)).size, 1);
  t.same(delays, [50, 100], 'backoff, as for a connection lost before the answer');

  const reads = await fakeService(t, [{ status: 200, body: { token: { id: 'tok_1', name: 'k', expires_at: null, demo: false }, usage: [] }, truncate: true }]);
  t.match(await client(reads.baseUrl).c.me(), { kind: 'error', httpStatus: 0, code: 'network_error' }, 'a read cut off: an outcome, not a throw');
});

t.test('retries stop at maxAttempts and the last error is returned as retryable', async (t) => {
  const svc = await fakeService(t, [{ status: 503, body: err('server_busy') }]);
  const { c, delays } = client(svc.baseUrl, { maxAttempts: 3 });
  const out = await c.verify('rgb_liveness', packet().metadata, packet().files, { idempotencyKey: 'k' });
  t.equal(out.kind, 'error');
  if (out.kind !== 'error') return;
  t.equal(out.code, 'server_busy');
  t.equal(out.httpStatus, 503);
  t.equal(out.retryable, true);
  t.equal(out.attempts, 3);
  t.equal(out.idempotencyKey, 'k');
  t.equal(svc.seen.length, 3);
  t.same(delays, [50, 100]);
});

t.test('backoff is bounded by maxDelayMs', async (t) => {
  const svc = await fakeService(t, [{ status: 500, body: err('internal_error') }]);
  const { c, delays } = client(svc.baseUrl, { maxAttempts: 7, random: () => 0.999 });
  await c.verify('rgb_liveness', packet().metadata, packet().files);
  t.same(delays, [99, 199, 399, 799, 999, 999]);
});

t.test('a Retry-After beyond maxRetryAfterMs is handed back instead of blocking', async (t) => {
  const svc = await fakeService(t, [{ status: 503, body: err('server_busy'), headers: { 'retry-after': '3600' } }]);
  const { c, delays } = client(svc.baseUrl, { maxRetryAfterMs: 60_000 });
  const out = await c.verify('rgb_liveness', packet().metadata, packet().files);
  t.equal(out.kind === 'error' && out.retryAfterMs, 3_600_000);
  t.equal(out.attempts, 1);
  t.same(delays, []);
});

t.test('final errors are never retried and never read as a verdict', async (t) => {
  const finals: [number, unknown][] = [
    [400, err('invalid_idempotency_key')],
    [401, err('invalid_token')],
    [403, err('module_forbidden')],
    [403, err('module_disabled')],
    [404, err('module_not_found')],
    [409, err('idempotency_conflict')],
    [413, err('payload_too_large')],
    [415, err('unsupported_media_type')],
    [429, err('quota_exceeded')],
    [500, err('settlement_failed')],
    [500, '<html>proxy error</html>'],
  ];
  for (const [status, body] of finals) {
    const svc = await fakeService(t, [{ status, body, headers: status === 429 ? { 'retry-after': '30' } : {} }]);
    const { c, delays } = client(svc.baseUrl);
    const out = await c.verify('rgb_liveness', packet().metadata, packet().files);
    const code = typeof body === 'string' ? `http_${status}` : (body as { error: { code: string } }).error.code;
    t.equal(out.kind, 'error', `${status} ${code} is an error, not a verdict`);
    t.notOk('verdicts' in out, 'no verdict field to misread');
    t.equal(out.kind === 'error' && out.code, code);
    t.equal(out.kind === 'error' && out.retryable, false);
    t.equal(svc.seen.length, 1, `${code} sent once`);
    t.same(delays, []);
    if (status === 429) t.equal(out.kind === 'error' && out.retryAfterMs, 30_000, 'quota reset time is passed on');
  }
});

t.test('422 carries the detail items', async (t) => {
  const detail = [{ loc: ['body', 'metadata', 'frames', 0, 'eyes_xy'], msg: 'x', type: 'eyes_too_close' }];
  const svc = await fakeService(t, [{ status: 422, body: { detail } }]);
  const out = await client(svc.baseUrl).c.verify('rgb_liveness', packet().metadata, packet().files);
  t.equal(out.kind, 'error');
  t.equal(out.kind === 'error' && out.code, 'invalid_input');
  t.same(out.kind === 'error' && out.detail, detail);
  t.equal(svc.seen.length, 1);
});

t.test('a 200 without a readable verdict is not a verdict', async (t) => {
  for (const body of ['not json', { results: 'x' }, okBody({ capture_id: 'a', status: 'ok', alive: null }), okBody({ status: 'ok', alive: true })]) {
    const svc = await fakeService(t, [{ status: 200, body }]);
    const out = await client(svc.baseUrl).c.verify('rgb_liveness', packet().metadata, packet().files);
    t.equal(out.kind, 'error', JSON.stringify(body));
    t.equal(out.kind === 'error' && out.code, 'invalid_response');
  }
});

t.test('a gateway 502/503/504 without the service body is retried', async (t) => {
  const svc = await fakeService(t, [{ status: 502, body: '<html>bad gateway</html>' }, { status: 200, body: okBody(result('cap-1', 'ok', true)) }]);
  const out = await client(svc.baseUrl).c.verify('rgb_liveness', packet().metadata, packet().files);
  t.equal(out.kind, 'completed');
  t.equal(out.attempts, 2);
});

t.test('the default sleep honours Retry-After: 0 and aborts with the signal', async (t) => {
  const svc = await fakeService(t, [{ status: 503, body: err('server_busy'), headers: { 'retry-after': '0' } }, { status: 200, body: okBody(result('cap-1', 'ok', true)) }]);
  const c = createVerifyClient({ baseUrl: svc.baseUrl + '/', token: 'x', maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 });
  const out = await c.verify('rgb_liveness', packet().metadata, packet().files);
  t.equal(out.kind, 'completed');
  t.equal(svc.seen[0].url, '/v1/modules/rgb_liveness/verify', 'trailing slash of baseUrl ignored');
  const busy = await fakeService(t, [{ status: 503, body: err('server_busy'), headers: { 'retry-after': '30' } }]);
  const slow = createVerifyClient({ baseUrl: busy.baseUrl, token: 'x', maxAttempts: 3 });
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error('user gave up')), 50);
  await t.rejects(slow.verify('rgb_liveness', packet().metadata, packet().files, { signal: ac.signal }), /user gave up/);
});

t.test('an invalid Idempotency-Key is refused before anything is sent', async (t) => {
  const c = createVerifyClient({ baseUrl: 'http://127.0.0.1:1', token: 'x' });
  for (const key of ['', 'has space', 'x'.repeat(201), 'tab\t', 'é']) {
    await t.rejects(c.verify('rgb_liveness', packet().metadata, packet().files, { idempotencyKey: key }), RangeError, JSON.stringify(key));
  }
});

t.test('helpers: Retry-After parsing, jitter bounds, retry classification', async (t) => {
  t.equal(parseRetryAfter('5'), 5000);
  t.equal(parseRetryAfter(null), null);
  t.equal(parseRetryAfter('soon'), null);
  t.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000);
  t.equal(backoffDelay(1, 100, 1000, () => 0), 0);
  t.equal(backoffDelay(10, 100, 1000, () => 0.5), 500);
  t.equal(isRetryable(409, 'request_in_progress'), true);
  t.equal(isRetryable(409, 'idempotency_conflict'), false);
  t.equal(isRetryable(500, 'settlement_failed'), false);
  t.equal(isRetryable(503, null), true);
  t.equal(isRetryable(500, null), false);
});

t.test('me and modules: the body, or the error with its code; nothing retried', async (t) => {
  const me = { token: { id: 'tok_1', name: 'kiosk', expires_at: null, demo: false }, usage: [] };
  const svc = await fakeService(t, [
    { status: 200, body: me },
    { status: 200, body: { modules: [{ module_id: 'rgb_liveness', status: 'available' }] } },
    { status: 401, body: err('invalid_token') },
    { status: 200, body: { something: 'else' } },
  ]);
  const { c } = client(svc.baseUrl);
  t.same(await c.me(), { kind: 'ok', value: me, requestId: 'req-1' });
  const mods = await c.modules();
  t.equal(mods.kind === 'ok' && mods.value.modules[0]!.status, 'available');
  t.same(await c.me(), { kind: 'error', httpStatus: 401, code: 'invalid_token', message: 'invalid_token', retryAfterMs: null, requestId: 'req-3' });
  t.match(await c.modules(), { kind: 'error', httpStatus: 200, code: 'invalid_response' }, 'a 200 that is not the documented shape');
  t.same(svc.seen.map((s) => `${s.method} ${s.url} ${s.headers.authorization}`), [
    'GET /v1/me Bearer lvk_test', 'GET /v1/modules Bearer lvk_test', 'GET /v1/me Bearer lvk_test', 'GET /v1/modules Bearer lvk_test',
  ]);
  const down = await createVerifyClient({ baseUrl: 'http://127.0.0.1:1', token: 'x' }).me();
  t.match(down, { kind: 'error', httpStatus: 0, code: 'network_error' });
});
