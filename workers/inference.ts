// A piscina worker: loads the enabled modules' graphs into its own sessions, warms them,
// reports progress on the pool's BroadcastChannel, then serves tasks.
import { BroadcastChannel, threadId, workerData } from 'node:worker_threads';
import type { ModuleId } from '../src/contract/index.ts';
import type { CapturesTask, PoolClose, WorkerClosed, WorkerConfig, WorkerReply, WorkerReport, WorkerTask } from '../src/inference/protocol.ts';
import { MODES, policyFor } from '../src/inference/modes/index.ts';
import { ModuleRunner } from '../src/inference/runner.ts';
import { collectAfterLargeTask } from '../src/inference/task-memory.ts';
import { createRuntime, type Runtime } from '../src/inference/runtime.ts';
import { threadMetrics } from '../src/observability/thread-metrics.ts';

const config = workerData as WorkerConfig;
const channel = new BroadcastChannel(config.channel);
const report = (r: WorkerReport | WorkerClosed) => channel.postMessage(r);
// the pool's close: set before unref, since assigning onmessage starts (and refs) the channel
channel.onmessage = (ev) => {
  if (((ev as { data: unknown }).data as PoolClose | WorkerReport).kind === 'close') void release();
};
(channel as unknown as { unref(): void }).unref();

// This thread's default metrics (heap, event-loop delay, GC) reach /metrics by push: a scrape
// never waits on a thread that may be inside a long inference. The main thread keeps the
// latest snapshot of each pool thread; a busy thread's figures are as old as its task.
const METRICS_PUSH_MS = 5_000;
const metrics = threadMetrics(`inference-${threadId}`);
const pushMetrics = () => void metrics.snapshot().then((snapshot) => report({ kind: 'metrics', worker: threadId, snapshot }));
pushMetrics();
setInterval(pushMetrics, METRICS_PUSH_MS).unref();

async function runtimeFor(): Promise<Runtime> {
  if (config.provider !== 'webgpu') return createRuntime(config.provider, config.sessionThreads);
  try {
    return await createRuntime('webgpu', config.sessionThreads);
  } catch (e) {
    report({ kind: 'provider', worker: threadId, provider: 'wasm', note: `WebGPU unavailable (${(e as Error).message}); using WASM` });
    return createRuntime('wasm', config.sessionThreads);
  }
}

const runners = new Map<ModuleId, ModuleRunner>();
let runtime: Runtime | null = null;

/** Before the pool terminates this thread: sessions released, then the runtime closed (the
 * WebGPU device destroyed), answered once, even if init has not finished. */
let released: Promise<void> | null = null;
function release(): Promise<void> {
  released ??= (async () => {
    for (const r of runners.values()) await r.release().catch(() => {});
    runners.clear();
    await runtime?.close?.().catch(() => {});
  })().finally(() => report({ kind: 'closed', worker: threadId }));
  return released;
}

async function init(): Promise<(task: WorkerTask) => Promise<WorkerReply>> {
  try {
    runtime = await runtimeFor();
    report({ kind: 'provider', worker: threadId, provider: runtime.provider, note: null });
  } catch (e) {
    report({ kind: 'error', worker: threadId, module: null, message: (e as Error).message });
  }
  // Each module on its own: one whose graphs fail their checks stays unready with its
  // reason while the others load and serve.
  for (const id of runtime ? config.modules : []) {
    try {
      const t0 = performance.now();
      const runner = await ModuleRunner.load(runtime!, config.manifest, id);
      await runner.warmup(config.warmupRuns);
      runners.set(id, runner);
      report({ kind: 'warm', worker: threadId, module: id, ms: performance.now() - t0 });
    } catch (e) {
      report({ kind: 'error', worker: threadId, module: id, message: (e as Error).message });
    }
  }
  // A whole capture's work runs here (the mode's pure function), so the main thread
  // sends each task once and gets its records once.
  const handle = async (task: CapturesTask): Promise<WorkerReply> => {
    const runner = runners.get(task.module);
    if (!runner) throw new Error(`${task.module} is not loaded in this inference worker`);
    const ctx = { runner, manifest: config.manifest, policy: policyFor(config.manifest, task.module, task.mode) };
    const run = MODES[task.mode];
    try {
      return await run(ctx, task.captures);
    } catch (e) {
      if (task.captures.length === 1) return [{ error: (e as Error).message }];
    }
    // The task packed captures of several requests: try each alone, so only the one that
    // fails is reported failed and the others still get their records.
    const out: WorkerReply = [];
    for (const c of task.captures) {
      try {
        out.push((await run(ctx, [c]))[0]);
      } catch (e) {
        out.push({ error: (e as Error).message });
      }
    }
    return out;
  };
  return async (task: WorkerTask): Promise<WorkerReply> => {
    if (task.op === 'ping') return [];
    try {
      return await handle(task);
    } finally {
      // a large capture's pixels go back once answered, not at some later collection
      collectAfterLargeTask(task);
    }
  };
}

// piscina awaits a default-exported promise, so a worker takes tasks only once warm.
export default init();
