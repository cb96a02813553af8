// Bare inference engine throughput on the compiled build, no HTTP: the pool the service
// runs (INFERENCE_THREADS=2 -> 2 pool workers of 1 thread), fed decoded crops by 4
// concurrent callers, captures/s per case. With --baseline DIR the same cases run against
// another build (e.g. the code before a change) in interleaved rounds, so the shared
// machine's load drift hits both alike.
//
//   npm run build && node bench/engine.mjs [--baseline DIR] [--rounds 3] [--seconds 5] [--set raw_v1|tiny128]
//     [--backend auto|native|wasm] [--backends native,wasm] [--baseline-backend wasm]
//
// tiny128 is ../shared/peers/model (resize bilinear, as the peers do). `this build` runs on
// --backend (default auto, as the service does); --backends runs this build on each named
// backend instead, as systems of their own in the same interleaved rounds (same pool: 2
// workers x 1 thread), and writes engine-<set>-backends.{json,md}.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { opt } from './cli-args.mjs';
import { CASES as ENGINE_CASES, drive } from './engine-load.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const ROUNDS = Number(opt('rounds', 3));
const SECONDS = Number(opt('seconds', 5));
const SET = opt('set', 'raw_v1');
const BASELINE = opt('baseline', null);
const BACKEND = opt('backend', 'auto');
const BACKENDS = opt('backends', '').split(',').filter(Boolean);
const OUT = BACKENDS.length ? `engine-${SET}-backends` : `engine-${SET}`;
const CONCURRENCY = 4;

const CASES = Object.entries(ENGINE_CASES)
  .filter(([name]) => SET === 'raw_v1' || name !== 'color4')
  .map(([name, c]) => ({ name, ...c }))
  .filter((c) => !process.env.CASES || process.env.CASES.split(/[ ,]+/).includes(c.name));

function modelsDir(from) {
  if (SET !== 'tiny128') return { dir: join(from, 'models'), cleanup() {} };
  const peers = realpathSync(join(root, '../shared/peers'));
  const dir = mkdtempSync(join(tmpdir(), 'engine-bench-'));
  mkdirSync(join(dir, 'tiny128'));
  copyFileSync(join(peers, 'model/tiny128.onnx'), join(dir, 'tiny128/tiny128.onnx'));
  const m = JSON.parse(readFileSync(join(peers, 'model/tiny128.manifest.json'), 'utf8'));
  if (from === root) for (const g of m.modules.rgb_liveness.graphs) g.resize = 'bilinear';
  writeFileSync(join(dir, 'tiny128/manifest.json'), JSON.stringify(m));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

async function engineFor(from, name, backend = BACKEND) {
  if (!existsSync(join(from, 'dist/src/inference/index.js'))) throw new Error(`${from}: run \`npm run build\` there first`);
  const { createInferenceEngine } = await import(join(from, 'dist/src/inference/index.js'));
  const models = modelsDir(from);
  const engine = createInferenceEngine({
    modelsDir: models.dir, modelSet: SET, backend, threads: 2, warmupRuns: 30,
    enabledModules: SET === 'raw_v1' ? ['rgb_liveness', 'color_liveness'] : ['rgb_liveness'],
  });
  await engine.start();
  return { name, engine, provider: engine.executionProvider, cleanup: models.cleanup };
}

async function measure(engine, c) {
  let k = 0;
  return (await drive(async () => {
    const caps = c.job(k++);
    await engine.infer({ module_id: c.module, captures: caps });
    return caps.length;
  }, CONCURRENCY, SECONDS)).per_s;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const systems = [];
if (!BACKENDS.length) systems.push(await engineFor(root, 'this build'));
for (const b of BACKENDS) systems.push(await engineFor(root, b, b));
if (BASELINE) systems.push(await engineFor(BASELINE, 'baseline', opt('baseline-backend', 'wasm')));
const runs = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const c of CASES) {
      const order = systems.map((_, i) => systems[(i + r) % systems.length]);
      for (const s of order) {
        const v = await measure(s.engine, c);
        runs.push({ round: r, system: s.name, case: c.name, captures_per_s: v });
        console.error(`round ${r + 1}/${ROUNDS} ${c.name} ${s.name}: ${v.toFixed(1)} captures/s`);
      }
    }
  }
} finally {
  for (const s of systems) {
    await s.engine.close();
    s.cleanup();
  }
}
const lines = [
  `# Bare engine throughput, ${SET} (compiled build, ${new Date().toISOString()})`,
  '',
  `Command: \`npm run build && node bench/engine.mjs ${process.argv.slice(2).join(' ')}\`. 2 pool workers x 1 thread, ${CONCURRENCY} concurrent callers, rgb8 crops, medians of ${ROUNDS} interleaved ${SECONDS} s rounds.`,
  '',
  `Serving on: ${systems.map((s) => `${s.name} ${s.provider}`).join(', ')}.${BASELINE ? ' The baseline runs on --baseline-backend (default wasm: builds before the start-up measurement served `auto` there).' : ''} ` +
    `1-min load average at the end: ${loadavg()[0].toFixed(1)} (${availableParallelism()} cores).`,
  '',
  `| case | ${systems.map((s) => s.name).join(' | ')} |${BASELINE ? ' ratio |' : ''}${BACKENDS.length > 1 ? ` ${BACKENDS[0]} / ${BACKENDS[1]} |` : ''}`,
  `|---|${systems.map(() => '---|').join('')}${BASELINE ? '---|' : ''}${BACKENDS.length > 1 ? '---|' : ''}`,
];
const result = {};
for (const c of CASES) {
  const m = systems.map((s) => median(runs.filter((x) => x.system === s.name && x.case === c.name).map((x) => x.captures_per_s)));
  result[c.name] = Object.fromEntries(systems.map((s, i) => [s.name, m[i]]));
  const pair = BACKENDS.length > 1 ? ` ${(result[c.name][BACKENDS[0]] / result[c.name][BACKENDS[1]]).toFixed(2)} |` : '';
  lines.push(`| ${c.name} | ${m.map((v) => v.toFixed(1)).join(' | ')} |${BASELINE ? ` ${(m[0] / m[1]).toFixed(2)} |` : ''}${pair}`);
}
lines.push('');
mkdirSync(join(here, 'results'), { recursive: true });
const providers = Object.fromEntries(systems.map((s) => [s.name, s.provider]));
writeFileSync(join(here, 'results', `${OUT}.json`), `${JSON.stringify({ when: new Date().toISOString(), set: SET, rounds: ROUNDS, seconds: SECONDS, baseline: BASELINE, providers, load: loadavg(), medians: result, runs }, null, 2)}\n`);
writeFileSync(join(here, 'results', `${OUT}.md`), lines.join('\n'));
console.log(lines.join('\n'));
process.exit(0);
