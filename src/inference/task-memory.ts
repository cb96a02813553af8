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
