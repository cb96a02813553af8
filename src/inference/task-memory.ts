import { getHeapStatistics } from 'node:v8';
import type { CapturesTask } from './protocol.ts';
// the slab module alone: an inference thread has no use for the image codecs of images/index
import { isSharedPixels } from '../images/index.ts';

// A task's pixels arrive in an inference thread transferred, so their memory is that thread's
// and goes back only at its next garbage collection, which V8 may put off for tens of MiB of
// such external memory. After a task that brought a large capture (a long rgb8 sequence near
// the 32 MiB body limit) the thread collects, so a few such calls do not pile up there
// (bench/uploads.ts --big). The collection runs on the next turn, once the task has been
// answered and nothing holds its pixels any more. A full collection of an inference thread's
// heap takes a few ms; a task this size computes for far longer.
export const LARGE_TASK_BYTES = 8 * 1024 * 1024;

/** Schedules a garbage collection when `task` carried at least LARGE_TASK_BYTES of pixels;
 * true when it did. `gc` is the thread's global gc(), which exists where the main thread
 * started the pool with --expose-gc (src/cluster/tune-gc.ts); a pool started otherwise (tests, the CLI)
 * skips this. */
export function collectAfterLargeTask(
  task: CapturesTask,
  gc: (() => void) | undefined = (globalThis as { gc?: () => void }).gc,
  later: (run: () => void) => void = (run) => void setImmediate(run),
): boolean {
  if (!gc) return false;
  let bytes = 0;
  // shared pixels (frame-slab slots) are the API thread's memory, not this thread's
  for (const c of task.captures) for (const p of c.pixels) if (p && !isSharedPixels(p)) bytes += p.byteLength;
  if (bytes < LARGE_TASK_BYTES) return false;
  later(gc);
  return true;
}

/** How far a thread's external memory may grow past its low point before it collects. */
export const EXTERNAL_GROWTH_BYTES = 4 * 1024 * 1024;

type Gc = (options?: { type: 'minor' | 'major' }) => void;

/** The other garbage of an inference thread: every task leaves native memory held by small
 * JavaScript objects (V8's external memory, outside Node's ArrayBuffer allocator: the inference
 * runtime's buffers) that goes back only when V8 collects those objects, and V8 schedules that
 * by the thread's own JavaScript allocation, which is small. Measured in the soak (bench/results/soak-30min.md), the inference thread's
 * external memory rose by about 6 MiB a second to 30-37 MiB before each collection and fell to
 * 6-8: that sawtooth was most of the 10-second swing of the process's RssAnon. After a task,
 * once the thread's external memory is EXTERNAL_GROWTH_BYTES above the lowest it has been since
 * its last collection, a young-generation collection runs on the next turn (the task's objects
 * are young; it takes well under a millisecond on a heap this size, once every few dozen
 * captures). True when one was scheduled. `external` reads the thread's external memory. */
export class ExternalGarbage {
  private low = Infinity;
  private scheduled = false;
  collections = 0;

  constructor(
    private readonly gc: Gc | undefined = (globalThis as { gc?: Gc }).gc,
    private readonly external: () => number = () => getHeapStatistics().external_memory,
    private readonly later: (run: () => void) => void = (run) => void setImmediate(run),
  ) {}

  afterTask(): boolean {
    if (!this.gc || this.scheduled) return false;
    const now = this.external();
    this.low = Math.min(this.low, now);
    if (now - this.low < EXTERNAL_GROWTH_BYTES) return false;
    this.scheduled = true;
    this.later(() => {
      this.gc!({ type: 'minor' });
      this.collections++;
      this.scheduled = false;
      // what the collection could not free (objects already promoted) is the new low: the next
      // one waits for as much new growth, and V8's own full collections take the rest
      this.low = this.external();
    });
    return true;
  }
}
