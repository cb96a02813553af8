// The process's one piscina pool. Its size comes from the cores given to inference
// (INFERENCE_THREADS), never from the request count; callers queue on it.
import { BroadcastChannel } from 'node:worker_threads';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { engineThreadEntry, engineThreadExecArgv } from '../source-ext.ts';
import type { PoolClose, WorkerClosed, WorkerConfig, WorkerReport, WorkerReply, WorkerTask } from './protocol.ts';
import type { ExecutionProvider } from './types.ts';
import { WEBGPU_SESSION_THREADS } from './runtime.ts';

/** A pool thread's entry (source-ext.ts engineThreadEntry says where it lies), read at each
 * pool's start. */
export const workerFile = (): string => fileURLToPath(engineThreadEntry('inference.bundle.mjs', '../workers/inference.ts'));

/**
 * Small graphs gain little from intra-op threads and ORT-web's WASM threads are costly
 * to synchronise, so the threads go to workers first (one session thread each); past
 * 8 workers the memory of another WASM heap outweighs it, so sessions get the rest.
 * One GPU wants one submitting worker.
 */
export function poolShape(threads: number, provider: ExecutionProvider): { workers: number; sessionThreads: number } {
  const total = Number.isFinite(threads) && threads >= 1 ? Math.floor(threads) : 1;
  if (provider === 'webgpu') return { workers: 1, sessionThreads: WEBGPU_SESSION_THREADS };
  const workers = Math.min(total, 8);
  return { workers, sessionThreads: Math.max(1, Math.floor(total / workers)) };
}

/** Pixels are transferred with their whole ArrayBuffer. That is right when the view spans
 * its buffer, or starts at its buffer's first byte and the buffer is the capture's own: the
 * decoders make exactly such buffers (rgb8 and PNG pixels outside a frame-slab slot: a buffer
 * of exactly the pixels). Node's shared Buffer pool only ever
 * serves allocations under 4 KiB, so a view of at least that size at offset 0 is never a pool
 * slice. Anything else (an offset view, a resizable or shared buffer) is copied once; the
 * engine posts shared pixels (isSharedPixels) as they are and never asks. */
export function transferable(pixels: Uint8Array): Uint8Array {
  const buffer = pixels.buffer as ArrayBuffer & { resizable?: boolean };
  const own = pixels.byteOffset === 0 && (pixels.byteLength === buffer.byteLength || pixels.byteLength >= 4096)
    && buffer instanceof ArrayBuffer && buffer.resizable !== true;
  return own ? pixels : new Uint8Array(pixels);
}

export interface PoolTimes {
  waitTime: Piscina['histogram']['waitTime'];
  runTime: Piscina['histogram']['runTime'];
}

/** How long close() waits for the workers to release their sessions and devices before it
 * terminates them anyway. A native (onnxruntime-node) worker answers once the runtime call it
 * is in has returned (a session being created, a warm-up, a task: terminating it inside one
 * aborts the process, workers/inference.ts), so this bounds one such call on a loaded host,
 * not a normal close. A WASM worker is not waited for at all (close()). */
export const RELEASE_WAIT_MS = 30_000;

export class InferencePool {
  private readonly piscina: Piscina;
  private readonly channel: BroadcastChannel;
  private readonly stop = new SharedArrayBuffer(4);
  /** the workers close() need not wait for: those that answered the close, and those that
   * run ORT-web's WASM backend */
  private readonly closed = new Set<number>();
  private onClosed: (() => void) | null = null;
  private readonly provider: ExecutionProvider;

  constructor(
    config: Omit<WorkerConfig, 'channel' | 'stop'>,
    readonly workers: number,
    onReport: (r: WorkerReport) => void,
    onError: (e: Error) => void,
  ) {
    this.provider = config.provider;
    const channel = `inference-${randomUUID()}`;
    this.channel = new BroadcastChannel(channel);
    this.channel.onmessage = (ev) => {
      const r = (ev as { data: unknown }).data as WorkerReport | WorkerClosed;
      // a WebGPU worker that fell back to WASM holds no device: like a WASM pool's, close()
      // ends it without waiting for its answer
      if (r.kind === 'provider' && r.provider === 'wasm') this.settle(r.worker);
      if (r.kind === 'closed') this.settle(r.worker);
      else onReport(r);
    };
    this.piscina = new Piscina({
      filename: workerFile(),
      execArgv: engineThreadExecArgv(),
      minThreads: workers,
      maxThreads: workers,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      concurrentTasksPerWorker: 1,
      // ORT-web finishes async work between tasks; Atomics.wait would stall it.
      atomics: 'disabled',
      workerData: { ...config, channel, stop: this.stop } satisfies WorkerConfig,
    });
    this.piscina.on('error', onError);
  }

  /** Until this is called the report channel keeps the process alive. The engine calls it once
   * every worker has reported warm (or failed): piscina unrefs a worker as soon as its
   * start-up is done, and with the channel unref'd too a process with nothing else to do (a
   * CLI, a test) could exit before the last "warm" report, already posted, was delivered. An
   * idle pool never holds a process open afterwards. */
  unrefReports(): void {
    (this.channel as unknown as { unref(): void }).unref();
  }

  /** piscina's per-task queue-wait and run-time summaries (ms), for /metrics */
  get times(): PoolTimes {
    const h = this.piscina.histogram;
    return { waitTime: h.waitTime, runTime: h.runTime };
  }

  /** the thread ids of the pool's live threads (piscina drops one as it ends, and starts another) */
  threadIds(): Set<number> {
    return new Set(this.piscina.threads.map((w) => w.threadId).filter((id) => id >= 0));
  }

  run(task: WorkerTask, transfer: ArrayBuffer[] = []): Promise<WorkerReply> {
    return this.piscina.run(task, { transferList: transfer }) as Promise<WorkerReply>;
  }

  private settle(worker: number): void {
    this.closed.add(worker);
    if (this.closed.size >= this.workers) this.onClosed?.();
  }

  /** Asks every worker to release its sessions and GPU device, waits for them (bounded),
   * then terminates the threads; false when a worker did not answer in time. Terminating a
   * WebGPU worker with its device alive left the teardown to native finalizers at thread exit.
   * A WASM worker is terminated at once: it holds nothing outside its own heap, ends safely
   * inside a run (workers/inference.ts release()), and one inside a long run (a set refused at
   * MODEL_LOAD_TIMEOUT_SECONDS, its warm-up minutes long) cannot read the close message before
   * the run returns: waiting for its answer kept it computing for RELEASE_WAIT_MS and held a
   * SIGTERM that long (issue 43). */
  async close(): Promise<boolean> {
    // the timer is ref'd: the report channel is not, and the answers must be waited for
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const released = new Promise<void>((resolve) => {
      this.onClosed = resolve;
      if (this.provider === 'wasm' || this.closed.size >= this.workers) resolve();
      timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, RELEASE_WAIT_MS);
    });
    // the flag first: a worker still starting reads it before it loads anything
    Atomics.store(new Int32Array(this.stop), 0, 1);
    this.channel.postMessage({ kind: 'close' } satisfies PoolClose);
    await released;
    clearTimeout(timer);
    this.channel.close();
    await this.piscina.destroy();
    return !timedOut;
  }
}
