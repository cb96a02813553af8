import type { WorkerTask } from './protocol.ts';

// A task's pixels arrive in an inference thread transferred, so their memory is that thread's
// and goes back only at its next garbage collection, which V8 may put off for tens of MiB of
// such external memory. After a task that brought a large capture (a long rgb8 sequence near
// the 32 MiB body limit) the thread collects at once, so a few such calls do not pile up there
// (bench/uploads.ts --big: 6.8 -> 5.8 bodies over idle). A full collection of an inference
// thread's heap takes a few ms; a task this size computes for far longer.
export const LARGE_TASK_BYTES = 8 * 1024 * 1024;

/** Collects garbage when `task` carried at least LARGE_TASK_BYTES of pixels. `gc` is the
 * thread's global gc(), which exists where the main thread started the pool with
 * --expose-gc (src/main.ts); a pool started otherwise (tests, the CLI) skips this. */
export function collectIfLarge(task: WorkerTask, gc: (() => void) | undefined = (globalThis as { gc?: () => void }).gc): boolean {
  if (!gc) return false;
  let bytes = 0;
  for (const c of task.captures) for (const p of c.pixels) bytes += p?.byteLength ?? 0;
  if (bytes < LARGE_TASK_BYTES) return false;
  gc();
  return true;
}
