// Runs in a one-thread piscina pool of bench/inference.ts: ORT-web fixes its WASM
// thread count once per thread, so each backend/thread configuration needs a fresh one.
import { join } from 'node:path';
import { loadManifest } from '../src/inference/manifest.ts';
import { FramePreparer, InputBuffer } from '../src/inference/preprocess.ts';
import { ModuleRunner } from '../src/inference/runner.ts';
import { createRuntime } from '../src/inference/runtime.ts';
import { seededCrop } from '../src/inference/seeded-crop.ts';
import type { ExecutionProvider } from '../src/inference/types.ts';

export interface FrameBenchConfig {
  modelsDir: string;
  provider: ExecutionProvider;
  threads: number;
  batch: number;
  seconds: number;
  warmupRuns: number;
}

export interface FrameBenchResult {
  provider: ExecutionProvider;
  threads: number;
  batch: number;
  /** mean over the whole measurement */
  ms_per_frame: number;
  /** fastest chunk of 10 runs */
  best_ms_per_frame: number;
  frames_per_s: number;
  /** of ms_per_frame, the TypeScript crop/resize/normalise share */
  preprocess_ms_per_frame: number;
  runs: number;
  error?: string;
}

export async function measureFrames(cfg: FrameBenchConfig): Promise<FrameBenchResult> {
  const runtime = await createRuntime(cfg.provider, cfg.threads);
  const runner = await ModuleRunner.load(runtime, loadManifest(join(cfg.modelsDir, 'raw_v1')), 'rgb_liveness');
  const frames = Array.from({ length: cfg.batch }, (_, i) => seededCrop(i + 1));
  for (let i = 0; i < cfg.warmupRuns; i++) await runner.runFrames(frames);
  // The machine may be shared: besides the mean, keep the fastest chunk of 10 runs,
  // which is what the graph costs when nothing else competes for the core.
  let runs = 0;
  let best = Infinity;
  const t0 = performance.now();
  const until = t0 + cfg.seconds * 1000;
  while (performance.now() < until || runs < 10) {
    const c0 = performance.now();
    for (let i = 0; i < 10; i++) await runner.runFrames(frames);
    best = Math.min(best, (performance.now() - c0) / (10 * cfg.batch));
    runs += 10;
  }
  const ms = (performance.now() - t0) / (runs * cfg.batch);
  await runner.release();
  const spec = runner.frameGraphs()[0];
  // as the runner does it: one compiled preparer, one reused input tensor
  const prep = new FramePreparer(spec);
  const input = new InputBuffer(spec, 1, 3);
  const p0 = performance.now();
  for (let i = 0; i < 50; i++) prep.write(frames[0], input.data, 0, 0, 3);
  const pre = (performance.now() - p0) / 50;
  return { provider: cfg.provider, threads: cfg.threads, batch: cfg.batch, ms_per_frame: ms, best_ms_per_frame: best, frames_per_s: 1000 / ms, preprocess_ms_per_frame: pre, runs };
}

export default async function run(cfg: FrameBenchConfig): Promise<FrameBenchResult> {
  try {
    return await measureFrames(cfg);
  } catch (e) {
    return { provider: cfg.provider, threads: cfg.threads, batch: cfg.batch, ms_per_frame: NaN, best_ms_per_frame: NaN, frames_per_s: NaN, preprocess_ms_per_frame: NaN, runs: 0, error: (e as Error).message };
  }
}
