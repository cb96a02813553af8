// The surface of src/observability/: what the other folders of src/ may import from it.

export { createLogger, drainLog, flushLogSync } from './logger.ts';
export type { Logger } from './logger.ts';
export { MainMetrics, RefundMetrics, WorkerMetrics, aggregateMetrics, foldCounters } from './metrics.ts';
export type { MetricsSnapshot } from './metrics.ts';
export { recordVerify, requestFacts } from './request-facts.ts';
export type { VerifyFacts } from './request-facts.ts';
export { otelProblems, stopThreadTracing, threadTracing, tracedMethods, tracingConfigured } from './tracing.ts';
export type { CallTrace, DropReason, SpanAttributes, Stages, Tracing } from './tracing.ts';
