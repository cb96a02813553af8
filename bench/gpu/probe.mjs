// One engine on one backend (bench/gpu/run.sh starts it on a GPU machine with the bundled
// node; it runs here too): the compiled engine of this checkout (dist/) on raw_v1, fed the
// benches' fixed captures (engine-load.mjs). Prints one JSON line per figure: setup, each case
// at each concurrency (captures/s, p50, p99), the CPU an idle warm engine uses in 2 s, and
// after SIGTERM how long close() took. Writes the scores of call 0 of each case to
// $SCORES_DIR (or $OUT)/scores-<label>.json, so that backends can be compared capture by
// capture (compare.mjs). Usage:
//   node bench/gpu/probe.mjs LABEL BACKEND THREADS SECONDS CONCURRENCIES [CASES]
// e.g. node bench/gpu/probe.mjs webgpu webgpu 1 3 4,16 single,batch32
import { writeFileSync } from 'node:fs';
import { CASES, drive } from '../engine-load.mjs';

const root = new URL('../../', import.meta.url);
const { createInferenceEngine } = await import(new URL('dist/src/inference/index.js', root).href);
const [label, backend, threadsArg, secondsArg, concArg, casesArg] = process.argv.slice(2);
const threads = Number(threadsArg), seconds = Number(secondsArg);
const concurrencies = concArg.split(',').map(Number);
const say = (o) => console.log(JSON.stringify({ label, ...o }));
const names = casesArg ? casesArg.split(',') : Object.keys(CASES);

const logs = [];
const t0 = performance.now();
const engine = createInferenceEngine({
  modelsDir: new URL('models', root).pathname, modelSet: 'raw_v1', backend, threads, warmupRuns: Number(process.env.LV_WARMUP ?? 10),
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
    const r = await drive(async () => {
      const job = CASES[n].job(k++);
      await engine.infer({ module_id: CASES[n].module, captures: job });
      return job.length;
    }, conc, seconds);
    say({ case: n, concurrency: conc, captures_per_s: +r.per_s.toFixed(1), p50_ms: +(r.p50_us / 1000).toFixed(2), p99_ms: +(r.p99_us / 1000).toFixed(2), calls: r.calls });
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
