// The relay alone, beside the engine bench: what it costs to get a task from an API worker to
// an inference thread and back, with no inference in it, on the compiled build and the
// service's own code (RemoteInference in a worker thread, src/cluster/relay.ts in the main
// thread, the engine's piscina pool with its real threads).
//
//   npm run build && node bench/relay.mjs [--rounds 3] [--seconds 2] [--backend auto|native|wasm]
//
// Legs, each timed at concurrency 1 (latency) and 4 (what the pool of 2 sustains), in
// interleaved rounds:
//   api-main        API worker -> main -> API worker (the main thread answers at once)
//   main-pool       main -> pool thread -> main (an empty task)
//   api-main-pool   API worker -> main -> pool thread -> main -> API worker (an empty task):
//                   the path every verify call takes today
//   frame-bare      one tiny128 rgb8 frame from the main thread (engine.infer)
//   frame-relayed   the same frame from the API worker, over the relay
// Writes bench/results/relay.{json,md}.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { opt } from './cli-args.mjs';
import { capture as engineCapture, drive } from './engine-load.mjs';

/** One single-frame rgb8 capture. */
const capture = (id) => engineCapture(id, 'rgb_single');

// The API worker's side: the service's RemoteInference on this thread's port to the main
// thread, driven by the main thread's commands.
async function apiWorker() {
  const { RemoteInference } = await import(join(workerData.root, 'dist/src/cluster/remote-inference.js'));
  const inference = new RemoteInference(parentPort);
  parentPort.on('message', (m) => {
    if (m.type === 'infer-done') {
      inference.settle(m.id, m.results, m.error);
      return;
    }
    if (m.cmd !== 'run') return;
    let k = 0;
    const call = m.kind === 'ping'
      ? () => inference.ping()
      : () => inference.infer({ module_id: 'rgb_liveness', captures: [capture(`w${k++}`)] });
    void drive(call, m.concurrency, m.seconds).then((result) => parentPort.postMessage({ cmd: 'done', result }));
  });
}

if (!isMainThread) await apiWorker();
else await main();

async function main() {
  const here = dirname(fileURLToPath(import.meta.url));
  const root = join(here, '..');
  const ROUNDS = Number(opt('rounds', 3));
  const SECONDS = Number(opt('seconds', 2));
  const BACKEND = opt('backend', 'auto');
  if (!existsSync(join(root, 'dist/src/cluster/relay.js'))) {
    console.error('bench/relay.mjs runs the compiled build: `npm run build` first');
    process.exit(2);
  }

  const { createInferenceEngine } = await import(join(root, 'dist/src/inference/index.js'));
  const { relayInference } = await import(join(root, 'dist/src/cluster/relay.js'));

  const peers = realpathSync(join(root, '../shared/peers'));
  const models = mkdtempSync(join(tmpdir(), 'relay-bench-'));
  mkdirSync(join(models, 'tiny128'));
  copyFileSync(join(peers, 'model/tiny128.onnx'), join(models, 'tiny128/tiny128.onnx'));
  const manifest = JSON.parse(readFileSync(join(peers, 'model/tiny128.manifest.json'), 'utf8'));
  for (const g of manifest.modules.rgb_liveness.graphs) g.resize = 'bilinear';
  writeFileSync(join(models, 'tiny128/manifest.json'), JSON.stringify(manifest));

  const engine = createInferenceEngine({ modelsDir: models, modelSet: 'tiny128', backend: BACKEND, threads: 2, warmupRuns: 30, enabledModules: ['rgb_liveness'] });
  await engine.start();
  // the main thread answers at once: only the API worker <-> main hop is left
  const echo = { readiness: () => [], infer: async () => [], ping: async () => {} };
  let target = echo;

  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { root } });
  let done = null;
  worker.on('message', (m) => {
    if (m.cmd === 'done') return done?.(m.result);
    relayInference(target, worker, m, () => {});
  });
  const inWorker = (kind, concurrency) => new Promise((resolve) => {
    done = resolve;
    worker.postMessage({ cmd: 'run', kind, concurrency, seconds: SECONDS });
  });

  let k = 0;
  const LEGS = {
    'api-main': (c) => ((target = echo), inWorker('ping', c)),
    'main-pool': (c) => drive(() => engine.ping(), c, SECONDS),
    'api-main-pool': (c) => ((target = engine), inWorker('ping', c)),
    'frame-bare': (c) => drive(() => engine.infer({ module_id: 'rgb_liveness', captures: [capture(`m${k++}`)] }), c, SECONDS),
    'frame-relayed': (c) => ((target = engine), inWorker('frame', c)),
  };
  const names = Object.keys(LEGS);
  const runs = [];
  const load = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < names.length; i++) {
      const leg = names[(i + round) % names.length];
      for (const concurrency of [1, 4]) {
        const r = await LEGS[leg](concurrency);
        runs.push({ round, leg, concurrency, ...r });
        console.error(`round ${round + 1}/${ROUNDS} ${leg} c=${concurrency}: ${r.per_s.toFixed(0)}/s p50 ${r.p50_us.toFixed(0)} us p99 ${r.p99_us.toFixed(0)} us`);
      }
    }
    load.push(loadavg()[0]);
  }
  const provider = engine.executionProvider;
  await engine.close();
  await worker.terminate();
  rmSync(models, { recursive: true, force: true });

  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const medians = {};
  for (const leg of names) {
    medians[leg] = {};
    for (const c of [1, 4]) {
      const mine = runs.filter((r) => r.leg === leg && r.concurrency === c);
      medians[leg][c] = { per_s: median(mine.map((r) => r.per_s)), p50_us: median(mine.map((r) => r.p50_us)), p99_us: median(mine.map((r) => r.p99_us)) };
    }
  }
  const when = new Date().toISOString();
  const f0 = (n) => n.toFixed(0);
  const md = [
    `# The relay alone (${when})`,
    '',
    `Command: \`npm run build && node bench/relay.mjs ${process.argv.slice(2).join(' ')}\`. Compiled build; tiny128 on ${provider}, pool of 2 threads x 1; ` +
      `${ROUNDS} interleaved rounds of ${SECONDS} s per leg and concurrency; medians. ${availableParallelism()} cores (${cpus()[0]?.model ?? 'unknown'}), ` +
      `1-min load average ${load.map((l) => l.toFixed(1)).join(' / ')} over the rounds.`,
    '',
    '| leg | c=1 p50 us | c=1 p99 us | c=1 calls/s | c=4 p50 us | c=4 p99 us | c=4 calls/s |',
    '|---|---|---|---|---|---|---|',
    ...names.map((leg) => {
      const a = medians[leg][1];
      const b = medians[leg][4];
      return `| ${leg} | ${f0(a.p50_us)} | ${f0(a.p99_us)} | ${f0(a.per_s)} | ${f0(b.p50_us)} | ${f0(b.p99_us)} | ${f0(b.per_s)} |`;
    }),
    '',
    `- relay share of one relayed frame at c=1 (p50): ${(100 * (medians['frame-relayed'][1].p50_us - medians['frame-bare'][1].p50_us) / medians['frame-relayed'][1].p50_us).toFixed(0)} % ` +
      `(${f0(medians['frame-relayed'][1].p50_us - medians['frame-bare'][1].p50_us)} us over the bare frame's ${f0(medians['frame-bare'][1].p50_us)} us)`,
    '',
  ];
  mkdirSync(join(here, 'results'), { recursive: true });
  writeFileSync(join(here, 'results/relay.json'), `${JSON.stringify({ when, provider, rounds: ROUNDS, seconds: SECONDS, load, medians, runs }, null, 2)}\n`);
  writeFileSync(join(here, 'results/relay.md'), md.join('\n'));
  console.log(md.join('\n'));
  process.exit(0);
}
