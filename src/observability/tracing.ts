import { threadEntry } from '../source-ext.ts';
import type { Logger } from './logger.ts';

// OpenTelemetry traces of verify calls (docs/observability.md, "Traces").
//
// This module is what every API worker loads, and it holds no OpenTelemetry code: the SDK
// (tracing-sdk.ts, its own bundle in the compiled build, scripts/bundle.mjs) is imported only
// when the OTEL_* variables turn tracing on. With tracing off a worker keeps the memory the
// stand-in for @opentelemetry/api saves (scripts/otel-stub.cjs), and a call costs one null
// check per step.
//
// The spans are parented explicitly (a call's steps run one after another, so the call
// knows its open step) rather than through an AsyncLocalStorage context manager, which
// would tax every await of every request, traced or not.

export type { CallTrace, DropReason, SpanAttributes, Stages, Tracing, TracingOptions } from './tracing-types.ts';
import type { TracingOptions, Tracing, CallTrace, DropReason, SpanAttributes } from './tracing-types.ts';

/** Tracing is on when an OTLP endpoint or the otlp exporter is named, and the SDK is not
 * disabled: the OpenTelemetry SDK's own variables, nothing of this service's. */
export function tracingConfigured(env: NodeJS.ProcessEnv): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.split(',').map((e) => e.trim().toLowerCase()).filter(Boolean);
  if (exporters && exporters.length > 0) return exporters.includes('otlp');
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

const SAMPLERS = new Set(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']);
const BSP_VARIABLES = ['OTEL_BSP_MAX_QUEUE_SIZE', 'OTEL_BSP_SCHEDULE_DELAY', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 'OTEL_BSP_EXPORT_TIMEOUT'];

/**
 * The OTEL_* values tracing would not take as given, read at start: the OpenTelemetry
 * specification has an SDK ignore such a value (its default used) rather than fail, and this
 * service follows it, but says so when the process starts, where each was said only at the
 * first traced call (the sampler) or not at all (the endpoint, the batch processor's numbers).
 * Empty when tracing is off.
 */
export function otelProblems(env: NodeJS.ProcessEnv): string[] {
  if (!tracingConfigured(env)) return [];
  const out: string[] = [];
  const sampler = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  if (sampler !== undefined && sampler !== '' && !SAMPLERS.has(sampler)) out.push(`OTEL_TRACES_SAMPLER ${JSON.stringify(env.OTEL_TRACES_SAMPLER)} is not a known sampler; parentbased_always_on is used`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG;
  if (arg !== undefined && arg !== '' && !(Number(arg) >= 0 && Number(arg) <= 1)) out.push(`OTEL_TRACES_SAMPLER_ARG ${JSON.stringify(arg)} is not a ratio in [0, 1]; 1 is used`);
  for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']) {
    const url = env[name];
    if (url === undefined || url === '') continue;
    let ok = false;
    try {
      ok = ['http:', 'https:'].includes(new URL(url).protocol);
    } catch {
      ok = false;
    }
    if (!ok) out.push(`${name} is not an http(s) URL: no trace will be delivered`);
  }
  for (const name of BSP_VARIABLES) {
    const v = env[name];
    if (v !== undefined && v !== '' && !/^\d+$/.test(v.trim())) out.push(`${name} ${JSON.stringify(v)} is not a non-negative integer; the default is used`);
  }
  return out;
}

// one tracer per thread, started once, whoever asks first
let started: Promise<Tracing | null> | null = null;
let ready: Tracing | null | undefined;

/** This thread's tracing: null when off, a promise while the SDK loads (the first call of a
 * worker waits for it, no call is left untraced), the tracer once loaded. A failure to load
 * is logged and leaves tracing off; it never fails a request. */
export function threadTracing(options: TracingOptions): Tracing | null | Promise<Tracing | null> {
  if (ready !== undefined) return ready;
  if (!tracingConfigured(options.env)) return (ready = null);
  started ??= import(threadEntry('tracing.bundle.mjs', 'observability/tracing-sdk.ts').href)
    .then((sdk: typeof import('./tracing-sdk.ts')) => sdk.startSdk(options))
    .catch((err: unknown) => {
      options.log.error({ err }, 'tracing could not start; verify calls are not traced');
      return null;
    })
    .then((t) => (ready = t));
  return started;
}

/** Ends this thread's tracing, exporting what is queued (a worker's stop), waiting at most
 * `boundMs` for the collector: a dead one must not hold up a stop. Never rejects. */
export async function stopThreadTracing(boundMs = 2000): Promise<void> {
  const t = ready ?? (started ? await started : null);
  ready = undefined;
  started = null;
  if (!t) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    t.shutdown().catch(() => {}),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, boundMs);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

/**
 * `target` with its methods (all, or those named) run in child spans of the call's open step,
 * named `${prefix}.${method}`, carrying the method's name and never its arguments: the
 * statements a step sends the store, the inference it waits for. Only for a recorded call:
 * an unsampled one uses the target itself.
 */
export function tracedMethods<T extends object>(target: T, trace: CallTrace, prefix: string, only?: readonly (keyof T & string)[]): T {
  if (!trace.recording) return target;
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value: unknown = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string' || (only && !(only as readonly string[]).includes(prop))) return value;
      let fn = wrapped.get(prop);
      if (fn === undefined) {
        const method = value as (...args: unknown[]) => unknown;
        const attributes = { 'code.function.name': prop };
        fn = (...args: unknown[]) => trace.child(`${prefix}.${prop}`, attributes, () => method.apply(obj, args));
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}
