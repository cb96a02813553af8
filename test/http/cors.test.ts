import t from 'tap';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/index.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken } from '../helpers/server.ts';

// CORS_ORIGINS over real HTTP. Node's http client is used because it sends an Origin header
// as given (a browser-side test lives in test/client/browser.test.ts).
// The service's app in process (test/helpers/api.ts: composeApiWorker, which hands createApp
// the CORS rules; the real engine and LMDB store where a verify call is answered; issue 43:
// these were two server starts): CORS is the app's answer to a request, the same in every API
// worker, so nothing here needs the process.
const ORIGIN = 'http://capture.example:8443';

function raw(baseUrl: string, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${baseUrl}${path}`, { method, headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const preflight = (origin: string, method = 'POST') => ({
  origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,idempotency-key,content-type,traceparent,tracestate',
});
const list = (header: string | undefined) => (header ?? '').split(/,\s*/).map((h) => h.toLowerCase()).sort();

// The service traces verify calls when OTEL_EXPORTER_OTLP_ENDPOINT names a receiver: this one
// takes the exports and answers them as a collector would (an empty success), so the verify
// answers carry the server span's traceparent.
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
t.teardown(() => receiver.close());
const OTLP = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

t.test('CORS_ORIGINS must be exact origins', async (t) => {
  t.same(loadConfig({}).CORS_ORIGINS, [], 'empty by default');
  t.same(loadConfig({ CORS_ORIGINS: 'https://a.example, http://127.0.0.1:5173,http://[::1]:80' }).CORS_ORIGINS,
    ['https://a.example', 'http://127.0.0.1:5173', 'http://[::1]:80']);
  for (const bad of ['*', 'https://a.example/', 'https://a.example/path', 'a.example', 'https://A.example', 'ftp://a.example']) {
    t.throws(() => loadConfig({ CORS_ORIGINS: bad }), /CORS_ORIGINS/, bad);
  }
});

t.test('without CORS_ORIGINS nothing changes', async (t) => {
  const server = await startApi();
  t.teardown(() => server.stop());
  const pre = await raw(server.baseUrl, 'OPTIONS', '/v1/modules/rgb_liveness/verify', preflight(ORIGIN));
  t.equal(pre.status, 405, 'a preflight is an ordinary wrong method');
  t.equal(pre.headers['access-control-allow-origin'], undefined);
  const me = await raw(server.baseUrl, 'GET', '/v1/me', { origin: ORIGIN });
  t.equal(me.status, 401);
  t.equal(me.headers['access-control-allow-origin'], undefined);
  t.equal(me.headers.vary, undefined);
});

t.test('with CORS_ORIGINS', async (t) => {
  // the tracing of an API worker thread is this thread's here: started by the first verify
  // call with these settings and reset by stop() (as test/observability/traces.test.ts does)
  const server = await startApi({ engine: 'real', ready: true, env: { CORS_ORIGINS: `https://other.example,${ORIGIN}`, OTEL_EXPORTER_OTLP_ENDPOINT: OTLP } });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);

  t.test('a listed origin gets its preflight on /v1 routes', async (t) => {
    for (const [path, method] of [['/v1/modules/rgb_liveness/verify', 'POST'], ['/v1/me', 'GET'], ['/v1/modules', 'GET']] as const) {
      const r = await raw(server.baseUrl, 'OPTIONS', path, preflight(ORIGIN, method));
      t.equal(r.status, 204, path);
      t.equal(r.headers['access-control-allow-origin'], ORIGIN);
      t.match(r.headers['access-control-allow-methods'], method);
      t.same(list(r.headers['access-control-allow-headers']), ['authorization', 'content-type', 'idempotency-key', 'traceparent', 'tracestate'], 'a browser may send the W3C trace context');
      t.equal(r.headers['access-control-allow-credentials'], undefined, 'no cookies across origins');
      t.match(r.headers.vary, /Origin/);
      t.ok(r.headers['x-request-id']);
    }
  });

  t.test('an unlisted origin, and /admin and /auth for anyone, get no CORS answer', async (t) => {
    const other = await raw(server.baseUrl, 'OPTIONS', '/v1/modules/rgb_liveness/verify', preflight('http://evil.example'));
    t.equal(other.status, 405);
    t.equal(other.headers['access-control-allow-origin'], undefined);
    t.match(other.headers.vary, /Origin/);
    for (const path of ['/admin/api/tokens', '/auth/login', '/admin', '/auth/session']) {
      const r = await raw(server.baseUrl, 'OPTIONS', path, preflight(ORIGIN));
      t.equal(r.status, 405, path);
      t.equal(r.headers['access-control-allow-origin'], undefined, path);
      const get = await raw(server.baseUrl, 'GET', path, { origin: ORIGIN });
      t.equal(get.headers['access-control-allow-origin'], undefined, `GET ${path}`);
    }
    // a preflight must ask for a method; a bare OPTIONS is routed as before
    const bare = await raw(server.baseUrl, 'OPTIONS', '/v1/me', { origin: ORIGIN });
    t.equal(bare.status, 405);
  });

  t.test('answers to a listed origin, errors included, expose what a capture client reads', async (t) => {
    const denied = await raw(server.baseUrl, 'GET', '/v1/me', { origin: ORIGIN });
    t.equal(denied.status, 401);
    t.equal(denied.headers['access-control-allow-origin'], ORIGIN, 'a browser can read the error');
    t.same(list(denied.headers['access-control-expose-headers']), ['idempotency-replayed', 'retry-after', 'traceparent', 'tracestate', 'x-request-id', 'x-verdict-signature']);

    const v = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'cors-1' })]), { origin: ORIGIN, 'idempotency-key': 'cors-key-1' });
    t.equal(v.status, 200, v.text);
    t.equal(v.headers.get('access-control-allow-origin'), ORIGIN);
    const replay = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'cors-1' })]), { origin: ORIGIN, 'idempotency-key': 'cors-key-1' });
    t.equal(replay.headers.get('idempotency-replayed'), 'true');
    t.equal(replay.headers.get('access-control-allow-origin'), ORIGIN, 'a replay carries CORS headers too');
    const plain = await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) });
    t.equal(plain.headers.get('access-control-allow-origin'), null, 'no Origin, no CORS headers');
  });

  t.test('a traced browser call: its traceparent continued, the server span\'s readable cross-origin', async (t) => {
    const trace = randomBytes(16).toString('hex');
    const sent = { traceparent: `00-${trace}-${randomBytes(8).toString('hex')}-01`, tracestate: 'vendor=browser' };
    // what a browser asks before a verify call carrying the trace context
    const pre = await raw(server.baseUrl, 'OPTIONS', '/v1/modules/rgb_liveness/verify', preflight(ORIGIN));
    t.equal(pre.status, 204);
    t.ok(['traceparent', 'tracestate'].every((h) => list(pre.headers['access-control-allow-headers']).includes(h)), 'the preflight allows both headers');
    const v = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'cors-traced' })]), { origin: ORIGIN, ...sent });
    t.equal(v.status, 200, v.text);
    t.equal(v.headers.get('access-control-allow-origin'), ORIGIN);
    const answered = v.headers.get('traceparent');
    t.match(answered, new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`), 'the answer names the server span, in the caller\'s trace');
    t.equal(v.headers.get('tracestate'), sent.tracestate, 'and the caller\'s tracestate');
    const exposed = list(v.headers.get('access-control-expose-headers') ?? undefined);
    t.ok(exposed.includes('traceparent') && exposed.includes('tracestate'), 'both exposed to the page');
  });
});
