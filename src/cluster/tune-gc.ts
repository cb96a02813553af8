import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config/index.ts';

/** V8 settings for every thread started after this (API workers, inference threads); V8 reads
 * them when it creates an isolate, so they are set before any worker starts.
 *
 * GC_INITIAL_OLD_SPACE_MB (default 0: V8's own sizing) is an operator's trade of memory for
 * fewer full collections. Each verify call allocates about a megabyte of ArrayBuffers per frame
 * in its API worker, and V8 starts a full collection whenever those outgrow a limit derived
 * from the heap's size; an API worker's heap is small, so that was a major GC every dozen calls,
 * and at 64 MB the API workers ran 4x fewer of them (single-png +8-16 % on 2 workers,
 * bench/results/uploads-runs.md). It was the default until the 30-minute soaks
 * (bench/results/soak-30min.md) showed the price: every thread may fill that much old
 * generation with garbage before its first full collection, so RssAnon rose for more than 30
 * minutes at 2 API workers, and at the default WORKERS (8 per core, 16 on 2 cores) 64 MiB per
 * isolate is about 1 GiB of garbage, reached only after hours (each worker sees a sixteenth of
 * the calls): an RSS alert fires on a healthy node. V8's own sizing sets each thread's limit
 * from what it kept at its last full collection, so the garbage a thread holds scales with its
 * live heap (12-15 MiB for an API worker), not with a fixed floor (docs/capacity.md, "Memory"). */
export function tuneGc(config: Config): void {
  if (config.GC_INITIAL_OLD_SPACE_MB > 0) setFlagsFromString(`--initial-old-space-size=${config.GC_INITIAL_OLD_SPACE_MB}`);
  // Threads started after this get a global gc(), which only the service's own code calls:
  // every API worker runs one full collection once it serves (src/worker.ts: loading and
  // compiling leave a few MiB of garbage per isolate, which an idle worker would otherwise keep
  // resident for long), and an inference thread collects after a large task and whenever the
  // native memory its runs leave has grown by a few MiB (src/inference/task-memory.ts).
  setFlagsFromString('--expose-gc');
}
