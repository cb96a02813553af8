import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import type { Config } from '../config/index.ts';

/** V8's own `--interrupt-budget` in the V8 it was measured on (11.3, node 20): how much bytecode
 * a function runs between two looks at whether it is hot enough to optimise. */
const V8_MEASURED = '11.3.';
const V8_INTERRUPT_BUDGET = 67_584;

/** The interrupt budget for `workers` API workers on `cores` cores, or null for V8's own.
 *
 * Every API worker is a V8 isolate that profiles and optimises the request path on its own, from
 * a 1 / WORKERS share of the calls, so with more API workers than cores (the default: 8 per
 * core) each function that gets hot is optimised once per worker: a trace of 16 API workers on
 * 2 cores showed 45-140 optimising compiles in every 10 s of single-png load, 40 s into it, most
 * of them the same functions again in another worker. Twice V8's budget lets fewer lukewarm
 * functions through, each compiled in 16 isolates: in interleaved runs at WORKERS=16,
 * concurrency 32, CPU per capture fell 19 % (single-png) and 4 % (batch32), and half V8's budget
 * raised it 42 % (bench/results/jit-budget-s50.md). Hot code is still optimised, only later;
 * nothing it computes changes. With no more API workers than cores V8's own budget stays, and
 * so does any other V8 than the one measured. */
export function interruptBudget(workers: number, cores: number, v8 = process.versions.v8): number | null {
  if (workers <= cores || !v8.startsWith(V8_MEASURED)) return null;
  return 2 * V8_INTERRUPT_BUDGET;
}

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
export function tuneGc(config: Config, cores = availableParallelism(), setFlags: (flags: string) => void = setFlagsFromString, execArgv = process.execArgv): void {
  if (config.GC_INITIAL_OLD_SPACE_MB > 0) setFlags(`--initial-old-space-size=${config.GC_INITIAL_OLD_SPACE_MB}`);
  // Threads started after this get a global gc(), which only the service's own code calls:
  // every API worker runs one full collection once it serves (src/worker.ts: loading and
  // compiling leave a few MiB of garbage per isolate, which an idle worker would otherwise keep
  // resident for long), and an inference thread collects after a large task and whenever the
  // native memory its runs leave has grown by a few MiB (src/inference/task-memory.ts).
  setFlags('--expose-gc');
  // V8 flags are the process's: this one holds for the main and inference threads too, which
  // are few and hot. A budget given on node's command line is the operator's and is kept.
  const budget = interruptBudget(config.WORKERS, cores);
  if (budget !== null && !execArgv.some((a) => /^--interrupt[-_]budget=/.test(a))) setFlags(`--interrupt-budget=${budget}`);
}
