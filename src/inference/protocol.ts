// What the main thread and the inference threads (workers/) say to each other: the one
// protocol of that boundary, in src/ so that nothing here imports a thread's entry (the
// threads import this). The pool's threads (workers/inference.ts) first, then auto's
// start-up probe (workers/backend-probe.ts). Everything here is structured-clone friendly;
// pixel buffers travel in transfer lists.
import type { PreparedCapture } from '../packets/index.ts';
import type { Mode, ModuleId } from '../contract/index.ts';
import type { Manifest } from './manifest.ts';
import type { ExecutionProvider, ResultRecord } from './types.ts';

export interface WorkerConfig {
  manifest: Manifest;
  modules: ModuleId[];
  provider: ExecutionProvider;
  sessionThreads: number;
  warmupRuns: number;
  /** BroadcastChannel name on which workers report warm-up progress */
  channel: string;
  /** one Int32: 1 once the pool closes (PoolClose as a flag, for a thread that opens the
   * channel after the message went) */
  stop: SharedArrayBuffer;
}

/** Whole captures of one module and mode; the worker answers one record per capture.
 * rgb_single tasks carry up to MAX_BATCH captures (one model batch), the others one. */
export type WorkerTask = CapturesTask | PingTask;

export interface CapturesTask {
  op: 'captures';
  module: ModuleId;
  mode: Mode;
  captures: PreparedCapture[];
}

/** An empty task, answered [] at once: what the path to an inference thread and back costs
 * without any work (bench/relay.mjs). */
export interface PingTask {
  op: 'ping';
}

/** One entry per capture: its record, or why it failed. A shared task can hold captures
 * of several requests, so a failure is reported per capture, never for the whole task. */
export type WorkerReply = (ResultRecord | { error: string })[];

export type WorkerReport =
  | { kind: 'provider'; worker: number; provider: ExecutionProvider; note: string | null }
  | { kind: 'warm'; worker: number; module: ModuleId; ms: number }
  | { kind: 'error'; worker: number; module: ModuleId | null; message: string }
  /** the thread's prom-client default metrics (getMetricsAsJSON), pushed every few seconds */
  | { kind: 'metrics'; worker: number; snapshot: unknown[] };

/** A worker's answer to PoolClose, seen by the pool only: its sessions are released and its
 * GPU device destroyed. */
export interface WorkerClosed {
  kind: 'closed';
  worker: number;
}

/** The pool's one message to its workers, on the same channel, before it terminates them:
 * release what terminating a thread would otherwise leave to native finalizers. */
export interface PoolClose {
  kind: 'close';
}

/** A task to one thread of `auto`'s start-up measurement (src/inference/backend-probe.ts): load
 * one candidate backend and warm it, time `calls` calls, then release it. */
export type ProbeTask =
  | { op: 'load'; provider: ExecutionProvider; threads: number; manifest: Manifest; modules: ModuleId[]; warmupRuns: number }
  | { op: 'measure'; calls: number }
  | { op: 'release' };

/** load: which modules loaded; measure: wall ms for `calls` calls */
export type ProbeReply = { loaded: ModuleId[]; errors: Record<string, string> } | { ms: number } | null;
