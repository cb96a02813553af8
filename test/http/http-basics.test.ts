import t from 'tap';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startApi } from '../helpers/api.ts';
import { waitFor } from '../helpers/wait.ts';

// The dispatcher's rules (request ids, the error body, 404/405, the OpenAPI document, /metrics,
// the request log) over real HTTP against the service's app in process (test/helpers/api.ts;
// was one server start). /metrics gathered across several API workers and the pool is
// test/observability/traces.test.ts's, on a started server.
const server = await startApi();
t.teardown(() => server.stop());

t.test('health/live answers live with a request id', async (t) => {
  const r = await fetch(`${server.baseUrl}/health/live`);
  t.equal(r.status, 200);
  t.same(await r.json(), { status: 'live' });
  t.match(r.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
});

t.test('unknown route is a JSON 404 in the error body shape', async (t) => {
  const r = await fetch(`${server.baseUrl}/v2/nothing`);
  t.equal(r.status, 404);
  const body = await r.json();
  t.equal(body.error.code, 'not_found');
  t.type(body.error.message, 'string');
  t.equal(body.request_id, r.headers.get('x-request-id'));
});

t.test('wrong method is a JSON 405 with Allow', async (t) => {
  const r = await fetch(`${server.baseUrl}/v1/me`, { method: 'DELETE' });
  t.equal(r.status, 405);
  t.equal(r.headers.get('allow'), 'GET');
  t.equal((await r.json()).error.code, 'method_not_allowed');
  const v = await fetch(`${server.baseUrl}/v1/modules/rgb_liveness/verify`);
  t.equal(v.status, 405);
  t.equal(v.headers.get('allow'), 'POST');
});

t.test('every request gets a distinct id', async (t) => {
  const ids = new Set<string>();
  for (let i = 0; i < 10; i++) ids.add((await fetch(`${server.baseUrl}/health/live`)).headers.get('x-request-id')!);
  t.equal(ids.size, 10);
});

t.test('openapi.json is a valid OpenAPI 3.1.0 document describing every endpoint', async (t) => {
  const r = await fetch(`${server.baseUrl}/openapi.json`);
  t.equal(r.status, 200);
  const doc = await r.json();
  t.equal(doc.openapi, '3.1.0');
  t.equal(doc.info.title, 'Algorithm Service');
  t.equal(doc.info.version, '0.5.1');
  const validator = new Validator();
  const res = await validator.validate(doc);
  t.ok(res.valid, JSON.stringify(res.errors ?? []).slice(0, 2000));
  t.equal(validator.version, '3.1');
  for (const p of ['/health/live', '/health/ready', '/v1/me', '/v1/modules', '/v1/modules/{module_id}/verify', '/auth/login', '/auth/session', '/auth/logout',
    '/admin/api/modules', '/admin/api/users', '/admin/api/tokens', '/admin/api/tokens/{id}', '/admin/api/tokens/{id}/grants/{module_id}',
    '/admin/api/usage', '/admin/api/audit', '/admin/api/settlements', '/admin/api/settlements/{id}/resolve']) {
    t.ok(doc.paths[p], `describes ${p}`);
  }
  const verify = doc.paths['/v1/modules/{module_id}/verify'].post;
  t.ok(verify.requestBody.content['multipart/form-data'], 'verify body is multipart');
  t.ok(doc.components.schemas.CapturePacket.properties.frames, 'packet schema comes from the validation schemas');
  t.equal(doc.components.schemas.CapturePacket.additionalProperties, false);
  t.match(doc.info.description, /loc/);
});

t.test('metrics from loopback count the requests', async (t) => {
  for (let i = 0; i < 6; i++) await fetch(`${server.baseUrl}/health/live`, { headers: { connection: 'close' } });
  const r = await fetch(`${server.baseUrl}/metrics`);
  t.equal(r.status, 200);
  const text = await r.text();
  const m = /lv_http_requests_total\{route="\/health\/live",method="GET",status="200"\} (\d+)/.exec(text);
  t.ok(m, 'request counter present');
  t.ok(Number(m![1]) >= 6, 'counts the requests');
  t.match(text, /lv_http_request_duration_seconds_bucket/);
});

t.test('request log lines carry id, route, status and latency but no token', async (t) => {
  const token = 'lvk_' + 'A'.repeat(43);
  const r = await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } });
  t.equal(r.status, 401);
  const id = r.headers.get('x-request-id');
  const line = await waitFor(() => server.logLines().find((l) => l.request_id === id), { what: 'the request log line' }).catch(() => undefined);
  t.ok(line, 'logged');
  t.equal(line.status, 401);
  t.equal(line.code, 'invalid_token');
  t.equal(line.route, '/v1/me');
  t.type(line.latency_ms, 'number');
  t.notOk(server.logs.join('\n').includes(token), 'token never logged');
});
