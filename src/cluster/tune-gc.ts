import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config/index.ts';

/** A larger initial old generation for every thread started after this (API workers,
 * inference threads). Each verify call allocates about a megabyte of ArrayBuffers per frame
 * in its API worker (body parts, zlib output, pixels), and V8 starts a full collection
 * whenever external memory passes a limit derived from the heap's size; an API worker's heap
 * is small, so that was a major GC every dozen calls, and the GC threads took about a fifth
 * of the CPU. At 64 MB the API workers ran 4x fewer major GCs and single-png rose by 8-16 %
 * here, with the same idle and upload RSS (docs/capacity.md, "Memory"). V8 reads the flag when it
 * creates an isolate, so it is set before any worker starts. */
export function tuneGc(config: Config): void {
  if (config.GC_INITIAL_OLD_SPACE_MB > 0) setFlagsFromString(`--initial-old-space-size=${config.GC_INITIAL_OLD_SPACE_MB}`);
  // Every API worker runs one full collection once it serves (src/worker.ts): loading and
  // compiling leave a few MiB of garbage per isolate, which an idle worker, or one whose old
  // generation stays under the size above, would otherwise keep resident for long. Threads
  // started after this get a global gc(); nothing else calls it.
  setFlagsFromString('--expose-gc');
}
