// One candidate backend of the start-up measurement (src/inference/backend-probe.ts), in a
// thread of its own: ORT-web fixes its WASM thread count once per thread, and a thread that
// ends takes its WASM heap with it, so a backend that loses leaves nothing behind but the
// native library's mapping. The thread keeps its sessions between tasks, so the caller can
// interleave short measurements of every candidate.
import { ModuleRunner } from '../src/inference/runner.ts';
import type { ProbeReply, ProbeTask } from '../src/inference/protocol.ts';
import { createRuntime, type Runtime } from '../src/inference/runtime.ts';
import { seededCrop } from '../src/inference/seeded-crop.ts';

let runners: ModuleRunner[] = [];
let runtime: Runtime | null = null;

const CROPS = [seededCrop(7), seededCrop(11), seededCrop(13), seededCrop(17)];

/** One "call" is what a single capture costs each loaded module: one frame through the frame
 * graphs (the single-frame request, the most common), four through the colour branches. */
async function oneCall(): Promise<void> {
  for (const r of runners) {
    if (r.moduleId === 'color_liveness') await r.runColor(CROPS);
    else await r.runFrames([CROPS[0]!]);
  }
}

export default async function probe(task: ProbeTask): Promise<ProbeReply> {
  if (task.op === 'load') {
    runtime = await createRuntime(task.provider, task.threads);
    const errors: Record<string, string> = {};
    for (const id of task.modules) {
      try {
        runners.push(await ModuleRunner.load(runtime, task.manifest, id));
      } catch (e) {
        errors[id] = (e as Error).message;
      }
    }
    for (let i = 0; i < task.warmupRuns; i++) await oneCall();
    return { loaded: runners.map((r) => r.moduleId), errors };
  }
  if (task.op === 'measure') {
    const t0 = performance.now();
    for (let i = 0; i < task.calls; i++) await oneCall();
    return { ms: performance.now() - t0 };
  }
  for (const r of runners) await r.release();
  runners = [];
  // WebGPU: the device goes before the thread does (runtime.ts destroyWebGpuDevice)
  await runtime?.close?.();
  runtime = null;
  return null;
}
