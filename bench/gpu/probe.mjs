// One engine on one backend, on a GPU host (bench/gpu/run.sh starts it with the bundled
// node): the compiled engine (dist/) and raw_v1, fixed pseudo-random crops. Prints one JSON
// line per figure: setup, each case at each concurrency (captures/s, p50, p99), the CPU an
// idle warm engine uses in 2 s, and after SIGTERM how long close() took. Writes the scores of
// fixed captures to $OUT/scores-<label>.json so that backends can be compared capture by
// capture (compare.mjs). Usage:
//   node probe.mjs LABEL BACKEND THREADS SECONDS CONCURRENCIES [CASES]
// e.g. node probe.mjs webgpu webgpu 1 3 4,16 single,batch32
import { writeFileSync } from 'node:fs';
import { createInferenceEngine } from './proj/dist/src/inference/index.js';

const [label, backend, threadsArg, secondsArg, concArg, casesArg] = process.argv.slice(2);
const threads = Number(threadsArg), seconds = Number(secondsArg);
const concurrencies = concArg.split(',').map(Number);
const say = (o) => console.log(JSON.stringify({ label, ...o }));

// Deterministic crops (an LCG), so every backend scores the same pixels.
function crop(seed) {
  const px = new Uint8Array(320 * 320 * 3);
  let s = seed >>> 0;
  for (let i = 0; i < px.length; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; px[i] = s >>> 24; }
  return px;
}
const CROPS = Array.from({ length: 8 }, (_, i) => crop(i + 11));
const PROFILE = { rgb_single: 'rgb_single_v1', rgb_sequence: 'rgb_contiguous_v1', color: 'color_wrgb_v1' };
function capture(id, mode, n) {
  const frames = Array.from({ length: n }, (_, i) => ({
    source_index: i, timestamp_us: i * 33000, status: 'ok', source_size: [720, 1280], eyes_xy: [[300, 400], [380, 400]],
    image: { part: `${id}_${i}`, encoding: 'rgb8', sha256: '0'.repeat(64) },
    ...(mode === 'color' ? { phase: ['white', 'red', 'green', 'blue'][i] } : {}),
  }));
  const packet = { protocol_version: 1, capture_id: id, mode, capture_profile: PROFILE[mode], preprocess_profile: 'eye_crop_320_v1', complete: true, frames };
  return { packet, pixels: frames.map((_, i) => CROPS[(i + id.length) % CROPS.length].slice()) };
}
const CASES = {
  single: { module: 'rgb_liveness', job: (k) => [capture(`s${k}`, 'rgb_single', 1)] },
  sequence20: { module: 'rgb_liveness', job: (k) => [capture(`q${k}`, 'rgb_sequence', 20)] },
  batch32: { module: 'rgb_liveness', job: (k) => Array.from({ length: 32 }, (_, i) => capture(`b${k}_${i}`, 'rgb_single', 1)) },
  color4: { module: 'color_liveness', job: (k) => [capture(`c${k}`, 'color', 4)] },
};
const names = casesArg ? casesArg.split(',') : Object.keys(CASES);

const logs = [];
const t0 = performance.now();
const engine = createInferenceEngine({
  modelsDir: new URL('./proj/models', import.meta.url).pathname, modelSet: 'raw_v1', backend, threads, warmupRuns: Number(process.env.LV_WARMUP ?? 10),
  enabledModules: ['rgb_liveness', 'color_liveness'], log: (obj, msg) => logs.push({ msg, ...obj }),
});
await engine.start();
say({ backend, threads, provider: engine.executionProvider, setup_ms: Math.round(performance.now() - t0), modules: engine.readiness().map((m) => ({ id: m.module_id, ready: m.ready, provider: m.execution_provider, note: m.execution_note, error: m.error })), log: logs.filter((l) => /auto|webgpu|backend/i.test(l.msg)) });

const scores = {};
for (const n of names) scores[n] = await engine.infer({ module_id: CASES[n].module, captures: CASES[n].job(0) });
const scoresDir = process.env.SCORES_DIR ?? process.env.OUT;
if (scoresDir) writeFileSync(`${scoresDir}/scores-${label}.json`, JSON.stringify(scores));

let k = 1;
for (const n of names) {
  for (const conc of concurrencies) {
    let caps = 0; const lat = [];
    const start = performance.now(), until = start + seconds * 1000;
    await Promise.all(Array.from({ length: conc }, async () => {
      while (performance.now() < until) {
        const job = CASES[n].job(k++); const a = performance.now();
        await engine.infer({ module_id: CASES[n].module, captures: job });
        lat.push(performance.now() - a); caps += job.length;
      }
    }));
    lat.sort((x, y) => x - y);
    const q = (p) => +lat[Math.min(lat.length - 1, Math.floor(lat.length * p))].toFixed(2);
    say({ case: n, concurrency: conc, captures_per_s: +(caps / ((performance.now() - start) / 1000)).toFixed(1), p50_ms: q(0.5), p99_ms: q(0.99), calls: lat.length });
  }
}

// Idle: what a warm engine with nothing to do costs (the process's CPU, all threads).
await new Promise((r) => setTimeout(r, 500));
const c0 = process.cpuUsage();
await new Promise((r) => setTimeout(r, 2000));
const c1 = process.cpuUsage(c0);
say({ idle_cpu_s_in_2s: +((c1.user + c1.system) / 1e6).toFixed(3) });

// SIGTERM as the service handles it: close the engine, then exit. run.sh times the whole
// exit from outside; close_ms is the engine's share.
process.on('SIGTERM', () => {
  const a = performance.now();
  void engine.close().then(() => {
    say({ close_ms: Math.round(performance.now() - a) });
    process.exit(0);
  });
});
say({ waiting_for: 'SIGTERM' });
setInterval(() => {}, 1 << 30);
