// The sampler's decision in startCall (src/observability/tracing-sdk.ts), in-process: the
// service asks the configured sampler before it lets the SDK build a span, so that a call left
// out costs no span object. This holds that shortcut to the SDK's own rule: a call is recorded
// exactly when the sampler named by OTEL_TRACES_SAMPLER says so for its trace id and parent,
// the recorded span carries that same trace id, and the answer's traceparent says which.
// The end-to-end path (a real server, a real OTLP receiver) is test/observability/traces.test.ts.
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { startSdk } from '../../src/observability/tracing-sdk.ts';

const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
t.teardown(() => receiver.close());
const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
// the OTLP exporter reads its endpoint from the process's environment itself
process.env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
const log = { info() {}, warn() {}, error() {}, debug() {} } as never;

function sdk(sampler: string, arg?: string) {
  return startSdk({
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_SAMPLER: sampler, ...(arg === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: arg }) },
    log,
    onDropped() {},
  });
}

const flagsOf = (traceparent: string) => traceparent.split('-')[3];
const traceOf = (traceparent: string) => traceparent.split('-')[1];

t.test('traceidratio at one half: recorded exactly when the SDK\'s own sampler says so for the call\'s trace id', async (t) => {
  for (const name of ['traceidratio', 'parentbased_traceidratio']) {
    const tracing = sdk(name, '0.5');
    const oracle = new TraceIdRatioBasedSampler(0.5);
    let recorded = 0;
    const calls = 400;
    for (let i = 0; i < calls; i++) {
      const call = tracing.startCall('POST /v1/modules/{module_id}/verify', undefined, undefined, { 'lv.request_id': `r${i}` });
      const expected = oracle.shouldSample(ROOT_CONTEXT, call.traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
      const header = call.headers().traceparent!;
      if (call.recording !== expected || traceOf(header) !== call.traceId || flagsOf(header) !== (expected ? '01' : '00')) {
        t.fail(`${name}: call ${i} recorded ${call.recording}, the sampler says ${expected}, answered ${header} for trace ${call.traceId}`);
      }
      if (call.recording) recorded++;
      call.end(200, undefined);
    }
    t.ok(recorded > calls * 0.35 && recorded < calls * 0.65, `${name}: ${recorded} of ${calls} recorded`);
    await tracing.shutdown();
  }
});

t.test('a caller\'s traceparent decides under parentbased_*: its trace id, its flag, its tracestate', async (t) => {
  const tracing = sdk('parentbased_traceidratio', '0');
  const callerTrace = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');

  const sampled = tracing.startCall('x', `00-${callerTrace}-${callerSpan}-01`, 'vendor=abc', {});
  t.ok(sampled.recording, 'the caller sampled it: recorded, whatever the ratio');
  t.equal(sampled.traceId, callerTrace);
  t.match(sampled.headers(), { traceparent: new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-01$`), tracestate: 'vendor=abc' });
  sampled.end(200, undefined);

  const left = tracing.startCall('x', `00-${callerTrace}-${callerSpan}-00`, 'vendor=abc', {});
  t.notOk(left.recording, 'the caller did not sample it');
  t.equal(left.traceId, callerTrace, 'still the caller\'s trace');
  const headers = left.headers();
  t.match(headers.traceparent, new RegExp(`^00-${callerTrace}-[0-9a-f]{16}-00$`));
  t.not(headers.traceparent!.split('-')[2], callerSpan, 'a span id of its own, not the caller\'s');
  t.equal(headers.tracestate, 'vendor=abc', 'the caller\'s tracestate travels on');
  t.equal(left.step('accept', () => 7), 7, 'steps run, unrecorded');
  t.equal(left.child('store.x', {}, (stages) => {
    stages.record('inference.pool_wait', {}, 0, 1);
    return 8;
  }), 8);

  const root = tracing.startCall('x', undefined, undefined, {});
  t.notOk(root.recording, 'ratio 0 and no caller: not recorded');
  t.match(root.headers(), { traceparent: /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/ });
  t.notOk('tracestate' in root.headers());

  const invalid = tracing.startCall('x', '00-00000000000000000000000000000000-0000000000000000-01', undefined, {});
  t.not(invalid.traceId, '00000000000000000000000000000000', 'an invalid traceparent starts a new trace');
  await tracing.shutdown();
});

t.test('always_on records every call, under the trace id it answers', async (t) => {
  const tracing = sdk('always_on');
  for (let i = 0; i < 20; i++) {
    const call = tracing.startCall('x', undefined, undefined, {});
    t.ok(call.recording);
    t.equal(traceOf(call.headers().traceparent!), call.traceId);
    t.equal(flagsOf(call.headers().traceparent!), '01');
    call.end(200, undefined);
  }
  await tracing.shutdown();
});

t.test('the OTEL_* values tracing would ignore are named at start (and none when tracing is off)', async (t) => {
  const { otelProblems } = await import('../../src/observability/tracing.ts');
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };
  t.same(otelProblems({ ...on, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1', OTEL_BSP_MAX_QUEUE_SIZE: '100' }), [], 'good values: nothing to say');
  const said = otelProblems({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not-a-url', OTEL_TRACES_SAMPLER: 'bogus', OTEL_TRACES_SAMPLER_ARG: '5', OTEL_BSP_MAX_QUEUE_SIZE: '-3' });
  t.equal(said.length, 4, said.join('; '));
  for (const name of ['OTEL_TRACES_SAMPLER ', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_BSP_MAX_QUEUE_SIZE']) t.ok(said.some((p) => p.startsWith(name)), `${name.trim()} named`);
  t.notOk(said.join(' ').includes('not-a-url'), 'the endpoint itself is not echoed (it may hold credentials)');
  t.same(otelProblems({ OTEL_TRACES_SAMPLER: 'bogus' }), [], 'tracing off: nothing read');
});

t.test('an empty OTEL_TRACES_SAMPLER_ARG is unset (ratio 1), not 0 (which sampled nothing)', async (t) => {
  const { samplerFromEnv } = await import('../../src/observability/tracing-sdk.ts');
  const warned: string[] = [];
  t.equal(String(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '' }, (m) => warned.push(m))), 'TraceIdRatioBased{1}');
  t.equal(String(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }, (m) => warned.push(m))), 'TraceIdRatioBased{0.25}');
  t.same(warned, []);
});

// docs/observability.md, "Sampling": a ratio is the operator's only for callers that are trusted
// with the trace context. Under parentbased_* the caller's sampled flag decides; under plain
// traceidratio the flag is ignored but the caller's trace id is kept and the ratio is a
// function of it (the SDK XORs its four 32-bit words), so a caller that picks its trace ids
// picks the decision too. Both are the specification's samplers, kept as they are.
t.test('what a caller decides: the flag under parentbased_*, its trace id under traceidratio', async (t) => {
  const hex = (bytes: number) => randomBytes(bytes).toString('hex');
  const word = () => randomBytes(4).readUInt32BE(0);
  /** a valid trace id whose four words XOR to 0: what the ratio sampler reads as "sample" */
  const chosen = () => {
    const [a, b, c] = [word(), word(), word()];
    return [a, b, c, (a ^ b ^ c) >>> 0].map((w) => w.toString(16).padStart(8, '0')).join('');
  };
  const recorded = (tracing: ReturnType<typeof sdk>, traceId: () => string, flags: string) => {
    let n = 0;
    for (let i = 0; i < 200; i++) {
      const call = tracing.startCall('x', `00-${traceId()}-${hex(8)}-${flags}`, undefined, {});
      if (call.recording) n++;
      call.end(200, undefined);
    }
    return n;
  };
  const parentBased = sdk('parentbased_traceidratio', '0.01');
  t.equal(recorded(parentBased, () => hex(16), '01'), 200, 'parentbased_traceidratio at 1 %: every call whose caller set the flag');
  await parentBased.shutdown();
  const ratio = sdk('traceidratio', '0.01');
  t.ok(recorded(ratio, () => hex(16), '01') < 20, 'traceidratio at 1 %: the flag alone decides nothing');
  t.equal(recorded(ratio, chosen, '00'), 200, 'traceidratio at 1 %: every call whose caller chose its trace id');
  await ratio.shutdown();
});
