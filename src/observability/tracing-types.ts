import type { Logger } from './logger.ts';

// The types shared by tracing.ts (loaded by every API worker) and tracing-sdk.ts (the SDK,
// loaded only when tracing is on): in a file of their own so that neither imports the other.

/** Values a span may carry: identifiers, names and counts only, never a token, an image
 * hash or a client address. */
export type SpanAttributes = Record<string, string | number | boolean | string[]>;

/** One verify call's trace: its server span and the spans of its steps. */
export interface CallTrace {
  /** the trace's id (32 hex digits), for the request log line */
  readonly traceId: string;
  /** false when the sampler left the call out: no span is recorded, the ids still travel */
  readonly recording: boolean;
  /** the W3C `traceparent` (and `tracestate`, when the caller sent one) naming the server span */
  headers(): Record<string, string>;
  /** Runs one step of the call in a span of its own, child of the server span; whatever the
   * step runs meanwhile through `child` nests under it. Sync or async alike. */
  step<T>(name: string, run: () => T): T;
  /** A span under the open step (a store call, the inference), or under the server span.
   * `run` may record, under this span, stages that another thread timed (`Stages`). */
  child<T>(name: string, attributes: SpanAttributes, run: (stages: Stages) => T): T;
  /** adds attributes to the server span */
  describe(attributes: SpanAttributes): void;
  /** ends the server span with the answer's status and error code */
  end(status: number, errorCode: string | undefined): void;
}

/** Spans of stages timed elsewhere (the engine's wait for a pool thread, the model's run), as
 * children of the span that `child` opened. */
export interface Stages {
  /** `start` and `end` in epoch ms (performance.timeOrigin + performance.now()); clamped into
   * the parent span, whose clock they were not read on */
  record(name: string, attributes: SpanAttributes, start: number, end: number): void;
}

export interface Tracing {
  /** A server span for one request, continuing the caller's `traceparent` when valid. */
  startCall(name: string, traceparent: string | undefined, tracestate: string | undefined, attributes: SpanAttributes): CallTrace;
  /** exports what is queued and stops (bounded by the exporter's timeout) */
  shutdown(): Promise<void>;
}

/** Why spans were lost: the bounded queue was full, or their export failed (collector down). */
export type DropReason = 'queue_full' | 'export_failed';

export interface TracingOptions {
  env: NodeJS.ProcessEnv;
  log: Logger;
  onDropped(reason: DropReason, spans: number): void;
}
