// A piscina worker: loads the enabled modules' graphs into its own sessions, warms them,
// reports progress on the pool's BroadcastChannel, then serves tasks.
import { BroadcastChannel, threadId, workerData } from 'node:worker_threads';
import type { ModuleId } from '../src/contract/index.ts';
import type { CapturesTask, PoolClose, WorkerClosed, WorkerConfig, WorkerReply, WorkerReport, WorkerTask } from '../src/inference/protocol.ts';
import { MODES, policyFor } from '../src/inference/modes/index.ts';
import { ModuleRunner } from '../src/inference/runner.ts';
import { collectAfterLargeTask, ExternalGarbage } from '../src/inference/task-memory.ts';
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

/** The pool's close as a flag as well as a message: a message posted on the channel before this
 * thread opened it never arrives, and a thread still starting when the process stops must not
 * go on to load sessions (src/inference/pool.ts close()). */
const closeFlag = new Int32Array(config.stop);
const closeRequested = () => Atomics.load(closeFlag, 0) === 1;

// Terminating this thread while onnxruntime-node is inside a call (creating a session, a run)
// aborts the whole process: the addon's call returns into an environment that is shutting down,
// node-addon-api cannot throw its error there and throws a C++ Napi::Error instead, which nothing
// catches ("terminate called after throwing an instance of 'Napi::Error'", exit 134; issue 39).
// So every step that calls into the runtime is counted, and release() (the pool waits for its
// answer before it terminates the thread) first waits until none is running; the steps look at
// the close before they start.
let running = 0;
let quiet: (() => void) | null = null;
async function native<T>(work: () => Promise<T>): Promise<T> {
  running++;
  try {
    return await work();
  } finally {
    if (--running === 0) quiet?.();
  }
}
const allQuiet = () => (running === 0 ? Promise.resolve() : new Promise<void>((resolve) => (quiet = resolve)));

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

/** warm runners, the ones tasks use */
const runners = new Map<ModuleId, ModuleRunner>();
/** every runner loaded, warm or not: what release() frees */
const loaded: ModuleRunner[] = [];
let runtime: Runtime | null = null;

/** Before the pool terminates this thread: once no runtime call is running, sessions
 * released, then the runtime closed (the WebGPU device destroyed), answered once, even if
 * init has not finished (init then loads nothing more). */
let released: Promise<void> | null = null;
function release(): Promise<void> {
  released ??= (async () => {
    // only onnxruntime-node must be left first: a WASM or WebGPU thread ends safely inside a
    // run (a graph that takes minutes, MODEL_LOAD_TIMEOUT_SECONDS, need not be waited for)
    if (config.provider === 'native') await allQuiet();
    runners.clear();
    for (const r of loaded.splice(0)) await r.release().catch(() => {});
    await runtime?.close?.().catch(() => {});
  })().finally(() => report({ kind: 'closed', worker: threadId }));
  return released;
}

/** True when the pool is closing: init stops there (and answers the close itself when the
 * channel's message was missed). */
function closing(): boolean {
  if (released) return true;
  if (!closeRequested()) return false;
  void release();
  return true;
}

async function init(): Promise<(task: WorkerTask) => Promise<WorkerReply>> {
  try {
    if (!closing()) {
      runtime = await native(runtimeFor);
      report({ kind: 'provider', worker: threadId, provider: runtime.provider, note: null });
    }
  } catch (e) {
    report({ kind: 'error', worker: threadId, module: null, message: (e as Error).message });
  }
  // Each module on its own: one whose graphs fail their checks stays unready with its
  // reason while the others load and serve.
  for (const id of runtime ? config.modules : []) {
    if (closing()) break;
    try {
      const t0 = performance.now();
      // pushed inside the step, so that a release waiting on this step frees it too
      const runner = await native(async () => {
        const r = await ModuleRunner.load(runtime!, config.manifest, id);
        loaded.push(r);
        return r;
      });
      if (closing()) break;
      // a close during the warm-up ends it at the next run (release() waits for this step)
      await native(() => runner.warmup(config.warmupRuns, () => released !== null || closeRequested()));
      if (closing()) break;
      runners.set(id, runner);
      report({ kind: 'warm', worker: threadId, module: id, ms: performance.now() - t0 });
    } catch (e) {
      report({ kind: 'error', worker: threadId, module: id, message: (e as Error).message });
    }
  }
  closing();
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
  const externalGarbage = new ExternalGarbage();
  return async (task: WorkerTask): Promise<WorkerReply> => {
    if (task.op === 'ping') return [];
    if (released) throw new Error('inference worker is closing');
    try {
      return await native(() => handle(task));
    } finally {
      // a large capture's pixels go back once answered, not at some later collection; the
      // native buffers that runs leave, every few MiB (task-memory.ts)
      if (!collectAfterLargeTask(task)) externalGarbage.afterTask();
    }
  };
}

// piscina awaits a default-exported promise, so a worker takes tasks only once warm.
export default init();
