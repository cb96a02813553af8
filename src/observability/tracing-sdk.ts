import { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, defaultTextMapSetter, trace, type Context, type MeterProvider, type Span } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, getNumberFromEnv, getStringFromEnv } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, RandomIdGenerator, SamplingDecision, TraceIdRatioBasedSampler, TracerProvider,
  type IdGenerator, type ReadableSpan, type Sampler, type SpanExporter,
} from '@opentelemetry/sdk-trace';
import { SERVICE_VERSION } from '../version.ts';
import type { CallTrace, SpanAttributes, Stages, Tracing, TracingOptions } from './tracing-types.ts';

// The OpenTelemetry SDK behind src/observability/tracing.ts, loaded only when tracing is on
// (its own bundle in the compiled build, with the real @opentelemetry/api).
//
// The SDK's 3.x packages no longer read the OTEL_* variables themselves, except the OTLP
// exporter (endpoint, headers, timeout, TLS files) and the resource's env detector
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): the sampler and the batch processor's
// variables are read here, with the specification's names and defaults.

const propagator = new W3CTraceContextPropagator();

// Every start and end is given as epoch milliseconds with the monotonic clock's fraction: left
// to itself the SDK starts a span at Date.now() (whole milliseconds) and measures its length
// from there, so the steps of a call, a few microseconds apart, could appear out of order or
// outside their parent by up to a millisecond.
const now = () => performance.timeOrigin + performance.now();
/** what an unrecorded call's child span hands its run: nothing is recorded */
const NO_STAGES: Stages = { record() {} };

/** OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the specification defines them
 * (default parentbased_always_on); an unknown name falls back to the default, logged. */
export function samplerFromEnv(env: NodeJS.ProcessEnv, warn: (msg: string) => void): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const ratio = (): number => {
    // empty is unset (the specification's rule for every OTEL_* variable): Number('') is 0,
    // which sampled nothing
    const given = env.OTEL_TRACES_SAMPLER_ARG?.trim() ? env.OTEL_TRACES_SAMPLER_ARG : undefined;
    const arg = Number(given ?? '1');
    if (given !== undefined && !(arg >= 0 && arg <= 1)) {
      warn(`OTEL_TRACES_SAMPLER_ARG ${JSON.stringify(env.OTEL_TRACES_SAMPLER_ARG)} is not a ratio in [0, 1]; 1 is used`);
      return 1;
    }
    return arg;
  };
  switch (name) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      warn(`OTEL_TRACES_SAMPLER ${JSON.stringify(name)} is not a known sampler; parentbased_always_on is used`);
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** The batch processor counts the spans it drops on a full queue through the meter it is
 * given (otel.sdk.processor.span.processed with error.type queue_full): this meter passes
 * that count on and ignores the rest, so no metrics SDK is loaded for it. */
function dropCounter(onQueueFull: (spans: number) => void): MeterProvider {
  const ignored = { add() {}, addCallback() {}, removeCallback() {} };
  const meter = {
    createCounter: () => ({
      add(n: number, attributes?: Record<string, unknown>) {
        if (attributes?.['error.type'] === 'queue_full') onQueueFull(n);
      },
    }),
    createUpDownCounter: () => ignored,
    createObservableUpDownCounter: () => ignored,
  };
  return { getMeter: () => meter } as unknown as MeterProvider;
}

/** The OTLP exporter, counting the spans of a failed export (a collector down or refusing) */
function countingExporter(inner: SpanExporter, onFailed: (spans: number) => void): SpanExporter {
  return {
    export(spans: ReadableSpan[], done) {
      inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) onFailed(spans.length);
        done(result);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

export function startSdk({ env, log, onDropped }: TracingOptions): Tracing {
  const warn = (msg: string) => log.warn({}, msg);
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (protocol !== undefined && protocol.trim() !== 'http/protobuf') warn(`OTLP protocol ${JSON.stringify(protocol)} is not supported; traces are sent as http/protobuf`);
  const resource = resourceFromAttributes({ 'service.name': 'liveness-service', 'service.version': SERVICE_VERSION })
    .merge(detectResources({ detectors: [envDetector] }));
  const processor = new BatchSpanProcessor({
    exporter: countingExporter(new OTLPTraceExporter(), (n) => onDropped('export_failed', n)),
    maxQueueSize: getNumberFromEnv('OTEL_BSP_MAX_QUEUE_SIZE') ?? 2048,
    maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE') ?? 512,
    scheduledDelayMillis: getNumberFromEnv('OTEL_BSP_SCHEDULE_DELAY') ?? 5000,
    exportTimeoutMillis: getNumberFromEnv('OTEL_BSP_EXPORT_TIMEOUT') ?? 30000,
    selfObsMeterProvider: dropCounter((n) => onDropped('queue_full', n)),
  });
  const sampler = samplerFromEnv(env, warn);
  const ids = new PresetIds();
  const provider = new TracerProvider({ resource, sampler, idGenerator: ids, spanProcessors: [processor] });
  const tracer = provider.getTracer('liveness-service', SERVICE_VERSION);
  log.info({
    endpoint: endpointForLog(getStringFromEnv('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? getStringFromEnv('OTEL_EXPORTER_OTLP_ENDPOINT') ?? 'http://localhost:4318'),
    sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
    sampler_arg: env.OTEL_TRACES_SAMPLER_ARG,
  }, 'tracing verify calls (OTLP http/protobuf)');

  return {
    startCall(name, traceparent, tracestate, attributes) {
      const carrier: Record<string, string> = {};
      if (traceparent !== undefined) carrier.traceparent = traceparent;
      if (tracestate !== undefined) carrier.tracestate = tracestate;
      // an invalid traceparent is ignored (a new trace), as the W3C recommendation says
      const parent = traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
      // The sampler is asked first, on the trace id the span will have: most calls are not
      // sampled (10 % is the documented setting), and the SDK's way to a non-recording span
      // (contexts, attribute copies, a span object) cost a single-frame call about 4 % of its
      // captures/s on its own (bench/results/traces-side-by-side-quiet.md). The samplers read
      // from OTEL_TRACES_SAMPLER decide on the parent and the trace id only, so the SDK, asked
      // again below with the same trace id (PresetIds), decides the same.
      const parentSpan = trace.getSpanContext(parent);
      const valid = parentSpan !== undefined && trace.isSpanContextValid(parentSpan);
      const traceId = valid ? parentSpan.traceId : ids.generateTraceId();
      if (sampler.shouldSample(parent, traceId, name, SpanKind.SERVER, {}, []).decision === SamplingDecision.NOT_RECORD) {
        return new UnsampledCall(traceId, ids.generateSpanId(), valid ? parentSpan.traceState?.serialize() : undefined);
      }
      if (!valid) ids.preset = traceId;
      const server = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes, startTime: now() }, parent);
      return new SdkCallTrace(tracer, server);
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
}

type SdkTracer = ReturnType<TracerProvider['getTracer']>;

/** The SDK's random ids, except that the next trace id may be set in advance: the one the
 * sampler was already asked about (startCall). Read synchronously right after it is set. */
class PresetIds implements IdGenerator {
  preset: string | undefined;
  private readonly random = new RandomIdGenerator();
  generateTraceId(): string {
    const id = this.preset ?? this.random.generateTraceId();
    this.preset = undefined;
    return id;
  }
  generateSpanId(): string {
    return this.random.generateSpanId();
  }
}

/** A call the sampler left out: no span object, only the ids its answer and log line carry
 * (the caller's trace id when it sent one, flags 00 so that what follows does not sample). */
class UnsampledCall implements CallTrace {
  readonly recording = false;
  constructor(readonly traceId: string, private readonly spanId: string, private readonly tracestate: string | undefined) {}
  headers(): Record<string, string> {
    const out: Record<string, string> = { traceparent: `00-${this.traceId}-${this.spanId}-00` };
    if (this.tracestate) out.tracestate = this.tracestate;
    return out;
  }
  step<T>(_name: string, run: () => T): T {
    return run();
  }
  child<T>(_name: string, _attributes: SpanAttributes, run: (stages: Stages) => T): T {
    return run(NO_STAGES);
  }
  describe(): void {}
  end(): void {}
}

class SdkCallTrace implements CallTrace {
  readonly traceId: string;
  readonly recording: boolean;
  private readonly context: Context;
  /** the step running now: a call's steps run one after another */
  private open: Context | null = null;

  constructor(private readonly tracer: SdkTracer, private readonly server: Span) {
    this.traceId = server.spanContext().traceId;
    this.recording = server.isRecording();
    this.context = trace.setSpan(ROOT_CONTEXT, server);
  }

  headers(): Record<string, string> {
    const out: Record<string, string> = {};
    propagator.inject(this.context, out, defaultTextMapSetter);
    return out;
  }

  step<T>(name: string, run: () => T): T {
    if (!this.recording) return run();
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, startTime: now() }, this.context);
    const previous = this.open;
    this.open = trace.setSpan(this.context, span);
    return within(span, run, () => {
      if (this.open !== null && trace.getSpan(this.open) === span) this.open = previous;
    });
  }

  child<T>(name: string, attributes: SpanAttributes, run: (stages: Stages) => T): T {
    if (!this.recording) return run(NO_STAGES);
    const opened = now();
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes, startTime: opened }, this.open ?? this.context);
    const parent = trace.setSpan(this.context, span);
    const stages: Stages = {
      record: (stage, stageAttributes, start, end) => {
        const last = now();
        const from = Math.min(Math.max(start, opened), last);
        this.tracer.startSpan(stage, { kind: SpanKind.INTERNAL, attributes: stageAttributes, startTime: from }, parent).end(Math.min(Math.max(end, from), last));
      },
    };
    return within(span, () => run(stages), () => {});
  }

  describe(attributes: SpanAttributes): void {
    if (this.recording) this.server.setAttributes(attributes);
  }

  end(status: number, errorCode: string | undefined): void {
    if (!this.recording) return;
    this.server.setAttribute('http.response.status_code', status);
    if (errorCode !== undefined) this.server.setAttribute('error.type', errorCode);
    // the semantic conventions' rule for a server span: a 5xx is its error, a 4xx the client's
    if (status >= 500) this.server.setStatus({ code: SpanStatusCode.ERROR, message: errorCode });
    this.server.end(now());
  }
}

/** Runs `run` in `span`, ending it when run returns or its promise settles; a failure
 * marks the span with the error's code (a ServiceError's), never its message. */
function within<T>(span: Span, run: () => T, after: () => void): T {
  const fail = (err: unknown) => {
    const code = typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : (err as Error)?.constructor?.name ?? 'error';
    span.setAttribute('error.type', code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  };
  let out: T;
  try {
    out = run();
  } catch (err) {
    fail(err);
    span.end(now());
    after();
    throw err;
  }
  if (out instanceof Promise) {
    return out.then(
      (v: unknown) => {
        span.end(now());
        after();
        return v;
      },
      (err: unknown) => {
        fail(err);
        span.end(now());
        after();
        throw err;
      },
    ) as T;
  }
  span.end(now());
  after();
  return out;
}

/** The OTLP endpoint as the log may show it: scheme, host, port and path. A user and password
 * in it are a working credential (the exporter sends them as Basic authorization) and a query
 * may carry an API key; both were logged word for word at every API worker's first call. */
export function endpointForLog(endpoint: string): string {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    return '[not a URL]';
  }
  const credentials = u.username !== '' || u.password !== '' ? '[redacted]@' : '';
  return `${u.protocol}//${credentials}${u.host}${u.pathname}${u.search !== '' ? '?[redacted]' : ''}`;
}
