// Bare in-process inference speed: per-frame cost of the raw_v1 RGB CNN (preprocessing
// included) on WASM with 1 and N threads and on native onnxruntime, and captures/s of
// the engine's pool per mode, the denominator of "service / bare inference".
// ORT-web fixes its thread count when its WASM starts, so each backend configuration
// runs in a fresh worker thread.
import { availableParallelism, cpus } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { createInferenceEngine } from '../src/inference/index.ts';
import { MAX_BATCH } from '../src/inference/manifest.ts';
import { seededCrop } from '../src/inference/seeded-crop.ts';
import { FRAME_SIZE } from '../models/builder/raw_v1.ts';
import type { InferenceJob } from '../src/inference/types.ts';
import { type FrameBenchConfig, type FrameBenchResult } from '../workers/frame-bench.ts';
import type { CapturePacket, FrameRecord, PreparedCapture } from '../src/packets/types.ts';
import type { Mode } from '../src/contract/index.ts';

const MODELS = fileURLToPath(new URL('../models', import.meta.url));
const CROPS = Array.from({ length: 8 }, (_, i) => seededCrop(i + 7));
const FRAME_WORKER = fileURLToPath(new URL('../workers/frame-bench.ts', import.meta.url));

async function inWorker(cfg: FrameBenchConfig): Promise<FrameBenchResult> {
  const pool = new Piscina({ filename: FRAME_WORKER, minThreads: 1, maxThreads: 1 });
  try {
    return (await pool.run(cfg)) as FrameBenchResult;
  } finally {
    await pool.destroy();
  }
}

function packet(id: string, mode: Mode, n: number): PreparedCapture {
  const frames: FrameRecord[] = Array.from({ length: n }, (_, i) => ({
    source_index: i, timestamp_us: i * 33_000, status: 'ok', source_size: [720, 1280], eyes_xy: [[300, 400], [380, 400]],
    image: { part: `${id}_${i}`, encoding: 'rgb8', sha256: '0'.repeat(64) },
    ...(mode === 'color' ? { phase: (['white', 'red', 'green', 'blue'] as const)[i] } : {}),
  }));
  const profile = mode === 'rgb_single' ? 'rgb_single_v1' : mode === 'rgb_sequence' ? 'rgb_contiguous_v1' : 'color_wrgb_v1';
  const p: CapturePacket = { protocol_version: 1, capture_id: id, mode, capture_profile: profile, preprocess_profile: 'eye_crop_320_v1', complete: true, frames };
  // Copies of pre-made crops: generating pixels here would bill the bench's own CPU to the pool.
  return { packet: p, pixels: frames.map((_, i) => CROPS[i % CROPS.length].slice()) };
}

async function measureEngine(threads: number, seconds: number) {
  const engine = createInferenceEngine({ modelsDir: MODELS, modelSet: 'raw_v1', backend: 'wasm', threads, warmupRuns: 30 });
  await engine.start();
  const cases: { name: string; module: InferenceJob['module_id']; mode: Mode; frames: number }[] = [
    { name: 'rgb_single', module: 'rgb_liveness', mode: 'rgb_single', frames: 1 },
    { name: 'rgb_sequence_20', module: 'rgb_liveness', mode: 'rgb_sequence', frames: 20 },
    { name: 'color_4', module: 'color_liveness', mode: 'color', frames: 4 },
  ];
  const out: Record<string, { captures_per_s: number; p50_ms: number; p99_ms: number; captures: number }> = {};
  const concurrency = 2 * threads;
  for (const c of cases) {
    const latencies: number[] = [];
    const t0 = performance.now();
    const until = t0 + seconds * 1000;
    let n = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until || latencies.length < concurrency) {
          const job = { module_id: c.module, captures: [packet(`b${n++}`, c.mode, c.frames)] };
          const s = performance.now();
          await engine.infer(job);
          latencies.push(performance.now() - s);
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
    out[c.name] = { captures_per_s: latencies.length / wall, p50_ms: q(0.5), p99_ms: q(0.99), captures: latencies.length };
  }
  await engine.close();
  return { provider: engine.executionProvider, threads, concurrency, modes: out };
}

/** Bare inference figures; `quick` keeps it CI-sized (about 20 s on 2 cores). */
export async function benchInference(opts: { quick: boolean }): Promise<object> {
  const threads = Number(process.env.INFERENCE_THREADS) || availableParallelism();
  const seconds = opts.quick ? 1.5 : 5;
  const warmupRuns = 30;
  const base = { modelsDir: MODELS, seconds, warmupRuns };
  const configs: FrameBenchConfig[] = [
    { provider: 'wasm', threads: 1, batch: 1, ...base },
    { provider: 'wasm', threads: 1, batch: MAX_BATCH, ...base },
    { provider: 'wasm', threads, batch: MAX_BATCH, ...base },
    { provider: 'native', threads: 1, batch: 1, ...base },
    { provider: 'native', threads: 1, batch: MAX_BATCH, ...base },
    { provider: 'native', threads, batch: MAX_BATCH, ...base },
  ];
  const per_frame: FrameBenchResult[] = [];
  for (const cfg of configs) {
    per_frame.push(await inWorker(cfg));
  }
  const engine = await measureEngine(threads, opts.quick ? 2 : 6);
  return {
    model_set: 'raw_v1',
    graph: `rgb_frame.onnx (${FRAME_SIZE}x${FRAME_SIZE} input, preprocessing from the 320 crop included)`,
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown' },
    per_frame,
    engine,
  };
}

function printReport(r: Awaited<ReturnType<typeof benchInference>>): void {
  const report = r as { per_frame: FrameBenchResult[]; engine: Awaited<ReturnType<typeof measureEngine>> };
  console.log('bare inference, raw_v1 rgb_frame (preprocessing included)');
  for (const f of report.per_frame) {
    console.log(
      `  ${f.provider.padEnd(6)} threads ${String(f.threads).padStart(2)}  batch ${f.batch}  ${f.ms_per_frame.toFixed(2).padStart(7)} ms/frame` +
        ` (best ${f.best_ms_per_frame.toFixed(2)})  ${f.frames_per_s.toFixed(0).padStart(6)} frames/s` +
        `  preprocessing ${f.preprocess_ms_per_frame.toFixed(2)} ms/frame${f.error ? `  error: ${f.error}` : ''}`,
    );
  }
  const e = report.engine;
  console.log(`engine pool (${e.provider}, ${e.threads} threads, ${e.concurrency} in flight)`);
  for (const [name, m] of Object.entries(e.modes)) {
    console.log(`  ${name.padEnd(16)} ${m.captures_per_s.toFixed(1).padStart(8)} captures/s  p50 ${m.p50_ms.toFixed(1)} ms  p99 ${m.p99_ms.toFixed(1)} ms`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  void benchInference({ quick }).then((result) => {
    printReport(result);
    if (process.argv.includes('--json')) console.log(JSON.stringify(result, null, 2));
    process.exit(0);
  });
}
