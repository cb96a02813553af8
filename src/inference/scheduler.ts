// The engine's scheduler: how prepared captures become pool tasks. Captures of one module and
// mode are grouped into tasks (single frames packed up to MAX_BATCH where the frame graphs take
// a dynamic batch), at most one task per pool thread is in flight, and the rest wait here in
// order. Bounded by admission: only admitted verify calls reach the engine, each with at most
// 32 captures.
import type { Mode, ModuleId } from '../contract/index.ts';
import { isSharedPixels } from '../images/index.ts';
import type { PreparedCapture } from '../packets/index.ts';
import { MAX_BATCH, type Manifest } from './manifest.ts';
import { transferable, type InferencePool } from './pool.ts';
import type { InferenceTiming, ResultRecord } from './types.ts';

/** What crossed between the main thread and the pool since start: one task message out
 * and one reply back per task. */
export interface EngineCounters {
  tasks: number;
  captures: number;
}

interface Waiting {
  capture: PreparedCapture;
  resolve: (r: ResultRecord) => void;
  reject: (e: Error) => void;
  /** its job's stages, when the caller traces it */
  timing: InferenceTiming | undefined;
}

/** epoch ms on the clock every thread shares (InferenceTiming) */
const epochNow = () => performance.timeOrigin + performance.now();

/** One pool task in the making: captures of one module and mode. */
interface Group {
  module: ModuleId;
  mode: Mode;
  items: Waiting[];
}

/**
 * Single-frame captures per task. Packing pays when the frame graphs take a dynamic
 * batch (4 frames in one model run). With fixed-batch graphs it saves only messages, and
 * coarser tasks balanced worse over the pool: on tiny128 batch32, packed tasks ran at
 * 0.43-0.97x the previous (unpacked) engine in 6 of 6 interleaved rounds of
 * bench/engine.mjs, unpacked ones at a median 1.22x, so such captures go one by one.
 */
export function packSizeFor(manifest: Manifest): number {
  const frameGraphs = (manifest.modules.rgb_liveness?.graphs ?? []).filter((g) => g.role === 'frame');
  return frameGraphs.length > 0 && frameGraphs.every((g) => g.role === 'frame' && g.batch === 'dynamic') ? MAX_BATCH : 1;
}

export class TaskScheduler {
  // Tasks not yet given to the pool. At most one task per pool worker is in flight, so
  // while all are busy single-frame captures, of one request or of several, gather here
  // into groups of up to MAX_BATCH.
  private readonly queue: Group[] = [];
  private inFlight = 0;
  private pumpScheduled = false;
  private readonly counts: EngineCounters = { tasks: 0, captures: 0 };

  /** `pool`: the engine's pool now (null before start and once closed: tasks then wait) */
  constructor(private readonly packSize: number, private readonly pool: () => InferencePool | null) {}

  counters(): EngineCounters {
    return { ...this.counts };
  }

  /** One record per capture, in order, once the pool threads that ran their tasks answer;
   * `timing`, when given, gets the job's stages. */
  schedule(module: ModuleId, captures: PreparedCapture[], timing: InferenceTiming | undefined): Promise<ResultRecord[]> {
    if (timing) timing.queued = epochNow();
    return Promise.all(captures.map((c) => this.enqueue(module, c, timing)));
  }

  private enqueue(module: ModuleId, capture: PreparedCapture, timing: InferenceTiming | undefined): Promise<ResultRecord> {
    return new Promise((resolve, reject) => {
      const mode = capture.packet.mode;
      const item = { capture, resolve, reject, timing };
      const open = mode === 'rgb_single'
        ? this.queue.find((g) => g.mode === mode && g.module === module && g.items.length < this.packSize)
        : undefined;
      if (open) open.items.push(item);
      else this.queue.push({ module, mode, items: [item] });
      this.schedulePump();
    });
  }

  /** Every capture still waiting fails with `err` (the engine closes). */
  rejectWaiting(err: Error): void {
    for (const g of this.queue.splice(0)) for (const it of g.items) it.reject(err);
  }

  // Deferred to the end of the current turn, so the captures of one call are all queued
  // (and packed) before the first task leaves.
  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    const pool = this.pool();
    while (pool && this.inFlight < pool.workers && this.queue.length > 0) this.dispatch(pool, this.queue.shift()!);
  }

  private dispatch(pool: InferencePool, group: Group): void {
    const transfer: ArrayBuffer[] = [];
    let captures: PreparedCapture[];
    try {
      captures = group.items.map(({ capture }) => {
        const pixels = capture.pixels.map((px) => {
          if (!px) return null;
          if (isSharedPixels(px)) return px; // a frame-slab slot: read in place, never transferred
          const own = transferable(px);
          transfer.push(own.buffer as ArrayBuffer);
          return own;
        });
        return { packet: capture.packet, pixels };
      });
    } catch (e) {
      for (const it of group.items) it.reject(e as Error);
      return;
    }
    this.inFlight++;
    this.counts.tasks++;
    this.counts.captures += captures.length;
    const timings = new Set<InferenceTiming>();
    for (const it of group.items) if (it.timing) timings.add(it.timing);
    if (timings.size > 0) {
      const now = epochNow();
      for (const t of timings) {
        t.started ??= now;
        t.tasks = (t.tasks ?? 0) + 1;
      }
    }
    // set before the items settle: the relay posts a job's timing as its promise settles
    const ended = () => {
      if (timings.size === 0) return;
      const now = epochNow();
      for (const t of timings) t.ended = now;
    };
    pool.run({ op: 'captures', module: group.module, mode: group.mode, captures }, transfer).then(
      (records) => {
        ended();
        group.items.forEach((it, i) => {
          const r = records[i];
          if (!r) it.reject(new Error(`inference worker returned no record for capture ${it.capture.packet.capture_id}`));
          else if ('error' in r) it.reject(new Error(r.error));
          else it.resolve(r);
        });
      },
      (err: Error) => {
        // a failed task came back too: its run is part of the trace
        ended();
        for (const it of group.items) it.reject(err);
      },
    ).finally(() => {
      this.inFlight--;
      this.pump();
    });
  }
}
