import t from 'tap';
import { createServer, type IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { SERVICE_VERSION } from '../../src/version.ts';
import { endpointForLog } from '../../src/observability/tracing-sdk.ts';

// The operator's view of a real server: its /metrics, its log lines and its traces, on one
// server start (issue 43: test/observability/metrics-logs.test.ts, a server start of its own,
// is the first part of this file now; every check of it is here).
//
// Metrics and logs: /metrics after a known mix of calls, and the request log lines those calls
// left. A real process: /metrics gathers the main thread, both API workers and the inference
// pool, and the start-up log is the main thread's. The server starts with testing-only
// settings, so the start-up warning naming them is checked here too (security issue 40,
// finding 10; test/config/testing-settings.test.ts holds which settings count). Its calls are
// the server's first, so its counts are exact.
//
// Traces of verify calls through the real server and a real OTLP/HTTP receiver: the
// service's OTLP exporter posts protobuf ExportTraceServiceRequests to this process, which
// decodes them with protobufjs and the OTLP trace messages (opentelemetry-proto's
// collector/trace/v1, trace/v1, common/v1 and resource/v1, the fields read here, with their
// field numbers as published).

const OTLP_PROTO = `
syntax = "proto3";
package otlp;
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; bytes bytes_value = 7; }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope { string name = 1; string version = 2; }
message Resource { repeated KeyValue attributes = 1; }
message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
  fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15; fixed32 flags = 16;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`;
const ExportRequest = protobuf.parse(OTLP_PROTO, { keepCase: true }).root.lookupType('otlp.ExportTraceServiceRequest');

interface Got {
  service: string;
  traceId: string;
  spanId: string;
  parent: string;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  attributes: Record<string, unknown>;
  status: number;
}

const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('hex');
function value(v: any): unknown {
  if (!v) return undefined;
  if (v.array_value) return (v.array_value.values ?? []).map(value);
  if (v.int_value !== undefined && v.int_value !== null) return Number(v.int_value);
  return v.string_value ?? v.bool_value ?? v.double_value;
}
const attrs = (kvs: any[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, value(kv.value)]));

const spans: Got[] = [];
const contentTypes = new Set<string>();
const receiver = createServer((req: IncomingMessage, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    contentTypes.add(`${req.method} ${req.url} ${req.headers['content-type']}`);
    const msg = ExportRequest.toObject(ExportRequest.decode(Buffer.concat(chunks)), { longs: String, bytes: Buffer }) as any;
    for (const rs of msg.resource_spans ?? []) {
      const service = String(attrs(rs.resource?.attributes)['service.name']);
      for (const ss of rs.scope_spans ?? []) {
        for (const s of ss.spans ?? []) {
          spans.push({
            service, traceId: hex(s.trace_id), spanId: hex(s.span_id), parent: hex(s.parent_span_id), name: s.name, kind: s.kind,
            start: BigInt(s.start_time_unix_nano), end: BigInt(s.end_time_unix_nano), attributes: attrs(s.attributes), status: s.status?.code ?? 0,
          });
        }
      }
    }
    // an empty ExportTraceServiceResponse: full success
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
t.teardown(() => receiver.close());
const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

const STEPS = ['accept', 'admit', 'receive', 'validate', 'reserve', 'infer', 'settle', 'respond'];
const VERIFY_ROUTE = '/v1/modules/:module_id/verify';

// TEST_WORKER_FAULTS (a header crashes a handler: no call here sends it) and
// TEST_PASSWORD_SCRYPT_N (no login here) are set for the start-up warning
// the collector's endpoint carries a user and password (the exporter sends them as Basic
// authorization): the log must not show them
const withPassword = endpoint.replace('http://', 'http://otlp-user:otlp-S3cret-pw@');
const server = await startServer({
  ready: true,
  env: {
    OTEL_EXPORTER_OTLP_ENDPOINT: withPassword, OTEL_SERVICE_NAME: 'lv-traces-test', OTEL_BSP_SCHEDULE_DELAY: '50', TEST_INFERENCE_FAIL_PREFIX: 'fail-',
    TEST_WORKER_FAULTS: '1', TEST_PASSWORD_SCRYPT_N: '1024',
  },
});
t.teardown(() => server.stop());

// --- metrics and logs (was test/observability/metrics-logs.test.ts) ----------------------------

interface Sample { name: string; labels: Record<string, string>; value: number }

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

t.test('a start with testing settings warns, naming each one', async (t) => {
  const warning = server.logLines().find((l) => /^TESTING ONLY settings are set/.test(l.msg ?? ''));
  t.ok(warning, 'the start-up log warns');
  t.equal(warning?.level, 40, 'at level warn');
  for (const name of ['TEST_INFERENCE_FAIL_PREFIX', 'TEST_PASSWORD_SCRYPT_N', 'TEST_WORKER_FAULTS']) t.ok(warning?.testing_settings.includes(name), `naming ${name}`);
  t.match(warning?.msg, /never set them in production/);
});

t.test('verdicts, units, quota rejections, readiness and process metrics reach /metrics; log lines carry the call', async (t) => {
  const one = await makeToken(server, ['rgb_liveness:1:day']);
  const five = await makeToken(server, ['rgb_liveness:5:day']);

  const ok = await postVerify(server.baseUrl, one.token, 'rgb_liveness', request([single({ id: 'm-ok' })]));
  t.equal(ok.status, 200);
  const r0 = ok.json.results[0];
  const verdict = r0.status === 'retry' ? 'retry' : r0.alive ? 'live' : 'non_live';
  const over = await postVerify(server.baseUrl, one.token, 'rgb_liveness', request([single({ id: 'm-over' })]));
  t.equal(over.status, 429);
  const failed = await postVerify(server.baseUrl, five.token, 'rgb_liveness', request([single({ id: 'fail-1' })]));
  t.equal(failed.status, 500);

  const res = await fetch(`${server.baseUrl}/metrics`);
  t.equal(res.status, 200);
  const samples = parse(await res.text());
  const value = (name: string, labels: Record<string, string>) => find(samples, name, labels).reduce((a, s) => a + s.value, 0);

  t.equal(value('lv_verdicts_total', { module: 'rgb_liveness', mode: 'rgb_single', verdict }), 1, `one ${verdict} verdict`);
  t.equal(find(samples, 'lv_verdicts_total').reduce((a, s) => a + s.value, 0), 1, 'the failed call left no verdict');
  t.equal(value('lv_units_total', { module: 'rgb_liveness', kind: 'charged' }), 2, 'the ok call and the failed call reserved a unit each');
  t.equal(value('lv_units_total', { module: 'rgb_liveness', kind: 'refunded' }), 1, 'the failed call was refunded');
  t.equal(value('lv_quota_rejections_total', { module: 'rgb_liveness' }), 1);
  t.equal(value('lv_verify_errors_total', { module: 'rgb_liveness', code: 'inference_failed' }), 1);
  t.equal(value('lv_model_ready', { module: 'rgb_liveness' }), 1);
  t.equal(value('lv_model_ready', { module: 'color_liveness' }), 1);
  // what an on-call engineer alerts on (issue 25): capacity, build, score drift
  const workers = [...new Set(find(samples, 'nodejs_heap_size_used_bytes').map((s) => s.labels.thread!).filter((th) => th.startsWith('api-')))].length;
  t.equal(value('lv_verify_slots', {}), 2 * workers, 'the host\'s verify slots, once (not once per worker)');
  t.equal(find(samples, 'lv_build_info', { version: SERVICE_VERSION, node: process.versions.node }).length, 1, 'build info');
  t.equal(value('lv_liveness_score_count', { module: 'rgb_liveness', mode: 'rgb_single' }), r0.score === null ? 0 : 1, 'the answered score is in the histogram');
  if (r0.score !== null) t.equal(value('lv_liveness_score_sum', { module: 'rgb_liveness', mode: 'rgb_single' }).toFixed(6), r0.score.toFixed(6));
  t.ok(find(samples, 'lv_inference_queue_wait_seconds', { quantile: '0.99' }).length === 1, 'queue wait reported');
  t.ok(value('lv_inference_compute_seconds', { quantile: '1' }) > 0, 'compute time reported');
  t.ok(find(samples, 'lv_verify_busy_total').length === 1, 'admission rejections reported');
  // each step counts the calls that reached it: the 429 stopped in reserve, the 500 in infer
  const steps = { accept: 3, receive: 3, validate: 3, reserve: 3, infer: 2, settle: 1, respond: 3 };
  for (const [step, calls] of Object.entries(steps)) {
    t.equal(value('lv_verify_step_seconds_count', { step }), calls, `${calls} call(s) timed in ${step}`);
    t.ok(value('lv_verify_step_seconds_sum', { step }) > 0, `${step} took time`);
  }

  const cpu = find(samples, 'process_cpu_user_seconds_total');
  t.equal(cpu.length, 1, 'process-wide CPU once, not once per thread');
  t.equal(cpu[0]!.labels.thread, 'main');
  const pool = [...new Set(find(samples, 'nodejs_heap_size_used_bytes').map((s) => s.labels.thread!).filter((th) => th.startsWith('inference-')))];
  t.ok(pool.length >= 1, `the inference pool threads report their own metrics (${pool.join(', ')})`);
  for (const thread of ['main', 'api-0', 'api-1', ...pool]) {
    t.equal(find(samples, 'nodejs_heap_size_used_bytes', { thread }).length, 1, `heap of ${thread}`);
    t.equal(find(samples, 'nodejs_eventloop_lag_p99_seconds', { thread }).length, 1, `event-loop delay of ${thread}`);
  }

  const rids = [ok.json.request_id, over.headers.get('x-request-id')!, failed.headers.get('x-request-id')!];
  const verifyLines = () => server.logLines().filter((l) => l.msg === 'request' && l.route === '/v1/modules/:module_id/verify');
  // the lines come through a pipe: wait for them, bounded
  await waitFor(() => rids.every((rid) => verifyLines().some((l) => l.request_id === rid)), { timeoutMs: 10_000, what: 'the three request log lines' });
  const lines = verifyLines();
  const line = (rid: string) => lines.find((l) => l.request_id === rid);
  t.match(line(ok.json.request_id), { module: 'rgb_liveness', token_id: one.id, units: 1, outcome: verdict, status: 200 });
  t.match(line(over.headers.get('x-request-id')!), { module: 'rgb_liveness', token_id: one.id, units: 0, outcome: 'error', code: 'quota_exceeded' });
  t.match(line(failed.headers.get('x-request-id')!), { module: 'rgb_liveness', token_id: five.id, units: 0, outcome: 'error', code: 'inference_failed' });
  const all = server.logs.join('\n');
  t.notOk(all.includes(one.token) || all.includes(five.token), 'no token in any log line');
});

// --- traces ------------------------------------------------------------------------------------

/** the spans of one trace once its server span and every step of `steps` have arrived */
function traceOf(traceId: string, steps: string[]) {
  const mine = spans.filter((s) => s.traceId === traceId);
  const root = mine.find((s) => s.kind === 2);
  if (!root || !steps.every((st) => mine.some((s) => s.name === st && s.parent === root.spanId))) return null;
  return { root, mine };
}

t.test('a call with the caller\'s traceparent: one trace, every step in order under the server span, store calls under their step', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const callerTrace = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'tr-1' })]), {
    traceparent: `00-${callerTrace}-${callerSpan}-01`, 'idempotency-key': 'trace-key-1',
  });
  t.equal(r.status, 200);
  const back = r.headers.get('traceparent');
  t.match(back, new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-01$`), 'the answer names the server span, in the caller\'s trace');

  // the audit write is not awaited by the answer: its span may come in a later export
  const { root, mine } = await waitFor(() => {
    const got = traceOf(callerTrace, STEPS);
    return got && got.mine.some((s) => s.name === 'store.writeAudit') ? got : null;
  }, { what: 'the call\'s spans at the receiver' });
  t.equal(root.service, 'lv-traces-test', 'OTEL_SERVICE_NAME is the resource\'s service.name');
  t.equal(root.parent, callerSpan, 'the server span continues the caller\'s span');
  t.equal(back, `00-${callerTrace}-${root.spanId}-01`, 'the traceparent answered is the server span\'s');
  t.equal(root.name, 'POST /v1/modules/{module_id}/verify');
  t.match(root.attributes, {
    'http.route': '/v1/modules/{module_id}/verify', 'http.response.status_code': 200, 'lv.module': 'rgb_liveness', 'lv.captures': 1,
    'lv.modes': ['rgb_single'], 'lv.replayed': false, 'lv.charged_units': 1, 'lv.request_id': r.json.request_id,
  });
  const steps = mine.filter((s) => s.parent === root.spanId).sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  t.same(steps.map((s) => s.name).filter((n) => STEPS.includes(n)), STEPS, 'the steps in the order they ran');
  for (const s of steps) t.ok(s.start >= root.start && s.end <= root.end, `${s.name} lies within the server span`);
  const under = (step: string) => mine.filter((s) => s.parent === steps.find((x) => x.name === step)!.spanId).map((s) => s.name);
  t.ok(under('accept').includes('store.getTokenByHash') && under('accept').includes('store.moduleEnabled'), `accept's store calls: ${under('accept')}`);
  t.same(under('reserve'), ['metering.reserve']);
  t.same(under('infer'), ['inference.infer']);
  // the engine's own stages, timed in the main thread, under the API worker's inference span
  const inferSpan = mine.find((s) => s.name === 'inference.infer')!;
  const stages = mine.filter((s) => s.parent === inferSpan.spanId).sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  t.same(stages.map((s) => s.name), ['inference.pool_wait', 'inference.model_run'], 'the wait for a pool thread, then the model\'s run');
  for (const s of stages) t.ok(s.start >= inferSpan.start && s.end <= inferSpan.end && s.start <= s.end, `${s.name} lies within inference.infer`);
  t.ok(stages[0].end <= stages[1].start, 'the run starts when the wait ends');
  t.equal(stages[1].attributes['lv.pool_tasks'], 1, 'one capture, one pool task');
  t.same(under('settle'), ['metering.settle']);
  t.ok(under('respond').includes('sign') && under('respond').includes('store.writeAudit'), `respond: ${under('respond')}`);
  t.equal(new Set(mine.map((s) => s.traceId)).size, 1);

  // nothing that identifies the caller or the images
  const everything = JSON.stringify(mine.map((s) => s.attributes));
  t.notOk(everything.includes(token), 'no token in any span');
  t.notOk(everything.includes('127.0.0.1'), 'no client address in any span');
  t.notMatch(everything, /[0-9a-f]{64}/, 'no image hash in any span');

  const line = await waitFor(() => server.logLines().find((l) => l.msg === 'request' && l.request_id === r.json.request_id));
  t.equal(line.trace_id, callerTrace, 'the request log line carries the trace id');
  t.ok([...contentTypes].every((c) => c === 'POST /v1/traces application/x-protobuf'), `OTLP/HTTP protobuf to /v1/traces (${[...contentTypes]})`);
});

t.test('a call without traceparent starts its own trace; a refused call ends at its step with its code', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:1:day']);
  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'tr-2' })]));
  t.equal(ok.status, 200);
  const okTrace = /^00-([0-9a-f]{32})-[0-9a-f]{16}-01$/.exec(ok.headers.get('traceparent') ?? '')?.[1];
  t.ok(okTrace, 'a traceparent comes back');
  const { root } = await waitFor(() => traceOf(okTrace!, STEPS));
  t.equal(root.parent, '', 'a root span: no caller to continue');

  const over = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'tr-3' })]));
  t.equal(over.status, 429);
  const overTrace = /^00-([0-9a-f]{32})-/.exec(over.headers.get('traceparent') ?? '')?.[1];
  const refused = await waitFor(() => traceOf(overTrace!, ['accept', 'admit', 'receive', 'validate', 'reserve', 'respond']));
  t.match(refused.root.attributes, { 'http.response.status_code': 429, 'error.type': 'quota_exceeded' });
  t.notOk(refused.mine.some((s) => s.name === 'infer' || s.name === 'settle'), 'no inference nor settlement for a refused call');
  t.equal(refused.mine.find((s) => s.name === 'reserve')!.attributes['error.type'], 'quota_exceeded');
  t.equal(refused.root.status, 0, 'a 4xx is the client\'s: the server span\'s status stays unset');

  // an unsampled caller: the call is not recorded, its ids still travel
  const callerTrace = randomBytes(16).toString('hex');
  const quiet = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'tr-4' })]), { traceparent: `00-${callerTrace}-${randomBytes(8).toString('hex')}-00` });
  t.match(quiet.headers.get('traceparent'), new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-00$`), 'not sampled, as the caller decided');
});

t.test('tracing off: nothing exported, no traceparent answered, no trace id logged', async (t) => {
  // the receiver is named, but OTEL_TRACES_EXPORTER=none turns the exporter off. The service's
  // app and engine in process (test/helpers/api.ts; was a server start): the tracing of an API
  // worker thread is this thread's, started by its first verify call and ended by stop()
  const off = await startApi({ engine: 'real', ready: true, env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: 'none', OTEL_SERVICE_NAME: 'lv-traces-off', OTEL_BSP_SCHEDULE_DELAY: '50' } });
  // stopped below; this one stops it if a check throws first (stop() runs once)
  t.teardown(() => off.stop());
  const { token } = await makeToken(off, ['rgb_liveness:1:day']);
  const r = await postVerify(off.baseUrl, token, 'rgb_liveness', request([single({ id: 'off-1' })]), { traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` });
  t.equal(r.status, 200);
  t.equal(r.headers.get('traceparent'), null, 'no traceparent in the answer');
  const line = await waitFor(() => off.logLines().find((l) => l.msg === 'request' && l.request_id === r.json.request_id));
  t.notOk('trace_id' in line, 'no trace id in the log line');
  await off.stop();
  t.equal(spans.filter((s) => s.service === 'lv-traces-off').length, 0, 'nothing reached the receiver from the server without tracing');
});

t.test('a collector that never answers costs dropped spans, counted, and no call waits for it', async (t) => {
  // holds every export open without an answer (a hung collector)
  const held: IncomingMessage[] = [];
  const hung = createServer((req) => {
    held.push(req);
    req.resume();
  });
  await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    hung.closeAllConnections();
    hung.close();
  });
  // in process too (test/helpers/api.ts; was a server start)
  const dead = await startApi({
    engine: 'real',
    ready: true,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(hung.address() as AddressInfo).port}`, OTEL_SERVICE_NAME: 'lv-traces-hung',
      // one export at a time: the first batch of 2 spans hangs for 2 s while the call's other
      // spans end, 2 of them queued and the rest dropped; then the hung export fails
      OTEL_BSP_MAX_QUEUE_SIZE: '2', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2', OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
    },
  });
  t.teardown(() => dead.stop());
  const { token } = await makeToken(dead, ['rgb_liveness:10:day']);
  for (let i = 0; i < 3; i++) {
    const r = await postVerify(dead.baseUrl, token, 'rgb_liveness', request([single({ id: `hung-${i}` })]));
    t.equal(r.status, 200, `call ${i} answered while the collector hangs`);
    t.match(r.headers.get('traceparent'), /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  }
  const dropped = (text: string, reason: string) => [...text.matchAll(new RegExp(`^lv_trace_spans_dropped_total\\{[^}]*reason="${reason}"[^}]*\\} (\\S+)$`, 'gm'))].reduce((a, m) => a + Number(m[1]), 0);
  const metrics = await waitFor(async () => {
    const text = await (await fetch(`${dead.baseUrl}/metrics`)).text();
    // thrown while not there yet: waitFor's failure then names the counts it last saw
    if (!(dropped(text, 'queue_full') > 0 && dropped(text, 'export_failed') > 0)) throw new Error(`queue_full ${dropped(text, 'queue_full')}, export_failed ${dropped(text, 'export_failed')}`);
    return text;
  }, { what: 'queue_full and export_failed drops counted', timeoutMs: 60_000 });
  t.ok(dropped(metrics, 'queue_full') > 0, `spans past the queue of 2 dropped: ${dropped(metrics, 'queue_full')}`);
  t.ok(dropped(metrics, 'export_failed') > 0, `spans of timed-out exports counted: ${dropped(metrics, 'export_failed')}`);
  t.ok(held.length > 0, 'the exports did reach the hung collector');
});

t.test('the collector\'s password never reaches the log; its host does', async (t) => {
  const v = await postVerify(server.baseUrl, (await makeToken(server, ['rgb_liveness:5:day'])).token, 'rgb_liveness', request([single({ id: 'otlp-log' })]));
  t.equal(v.status, 200);
  const line = await waitFor(() => server.logLines().find((l) => l.msg === 'tracing verify calls (OTLP http/protobuf)'), { what: 'the tracing line' });
  t.equal(line.endpoint, `http://[redacted]@${endpoint.slice('http://'.length)}/`, 'scheme, host, port and path; it was the endpoint word for word');
  t.notOk(server.logs.some((l) => l.includes('otlp-S3cret-pw')), 'no log line holds the password');
  t.equal(endpointForLog('https://collector.example:4318/v1/traces?api_key=k3y&x=1'), 'https://collector.example:4318/v1/traces?[redacted]', 'a query may hold a key');
  t.equal(endpointForLog('not a url'), '[not a URL]');
});
