// Idle RSS and time to ready of the compiled service with WORKERS=2 on each inference
// backend, and what `auto` chose: the memory side of the backend choice
// (docs/inference-backends.md). Each backend starts fresh in every round, rounds interleaved.
//
//   npm run build && node bench/idle-rss.mjs [--rounds 2] [--set raw_v1|tiny128]
//
// Idle RSS as bench/uploads.ts reads it: sampled once a second after /health/ready answers
// 200 until two readings agree within 1 MiB. Writes bench/results/idle-rss-<set>.{json,md}.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRODUCTION_ENV } from './production-env.mjs';
import { opt } from './cli-args.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const ROUNDS = Number(opt('rounds', 2));
const SET = opt('set', 'raw_v1');
const BACKENDS = opt('backends', 'wasm,native,auto').split(',');

const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);

async function idleRss(pid) {
  let last = rssKiB(pid);
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = rssKiB(pid);
    if (Math.abs(now - last) < 1024) return now;
    last = now;
  }
  return last;
}

function models(dir) {
  if (SET !== 'tiny128') return join(root, 'models');
  const peers = realpathSync(join(root, '../shared/peers'));
  mkdirSync(join(dir, 'models/tiny128'), { recursive: true });
  copyFileSync(join(peers, 'model/tiny128.onnx'), join(dir, 'models/tiny128/tiny128.onnx'));
  const m = JSON.parse(readFileSync(join(peers, 'model/tiny128.manifest.json'), 'utf8'));
  for (const g of m.modules.rgb_liveness.graphs) g.resize = 'bilinear';
  writeFileSync(join(dir, 'models/tiny128/manifest.json'), JSON.stringify(m));
  return join(dir, 'models');
}

async function once(backend, port) {
  const dir = mkdtempSync(join(tmpdir(), 'idle-rss-'));
  const env = { ...process.env, ...PRODUCTION_ENV, DATA_DIR: join(dir, 'data'), MODELS_DIR: models(dir), MODEL_SET: SET, LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: String(port), WORKERS: '2', INFERENCE_BACKEND: backend };
  if (SET === 'tiny128') spawnSync(process.execPath, [join(root, 'dist/src/cli/main.js'), 'module', 'disable', 'color_liveness'], { cwd: root, env });
  const t0 = performance.now();
  const proc = spawn(process.execPath, [join(root, 'dist/src/main.js')], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  try {
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`service exited: ${log.slice(-2000)}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health/ready`).then((r) => r.status === 200, () => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const ready_s = (performance.now() - t0) / 1000;
    const health = await (await fetch(`http://127.0.0.1:${port}/health/ready`)).json();
    const rss = await idleRss(proc.pid);
    const chose = log.split('\n').filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return null; } })
      .find((l) => l?.msg?.startsWith('inference: auto chose'));
    return { backend, provider: health.modules.rgb_liveness.execution_provider, ready_s, idle_rss_mib: rss / 1024, choice: chose ? { msg: chose.msg, figures: chose.figures } : null, load1: loadavg()[0] };
  } finally {
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await gone;
    rmSync(dir, { recursive: true, force: true });
  }
}

const runs = [];
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < BACKENDS.length; i++) {
    const b = BACKENDS[(i + round) % BACKENDS.length];
    const r = await once(b, 18480 + i);
    runs.push({ round, ...r });
    console.error(`round ${round + 1}/${ROUNDS} ${b}: serves ${r.provider}, ready in ${r.ready_s.toFixed(1)} s, idle RSS ${r.idle_rss_mib.toFixed(0)} MiB${r.choice ? ` (${r.choice.msg})` : ''}`);
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const when = new Date().toISOString();
const md = [
  `# Idle RSS and time to ready per backend, ${SET} (${when})`,
  '',
  `Command: \`npm run build && node bench/idle-rss.mjs ${process.argv.slice(2).join(' ')}\`. Compiled service, WORKERS=2, \`npm start\`'s environment, ` +
    `${ROUNDS} interleaved round(s); medians. ${availableParallelism()} cores, 1-min load average ${runs.map((r) => r.load1.toFixed(1)).join(' / ')} (a shared host: time to ready is stretched by it).`,
  '',
  '| INFERENCE_BACKEND | serves | idle RSS MiB | ready in s |',
  '|---|---|---|---|',
  ...BACKENDS.map((b) => {
    const mine = runs.filter((r) => r.backend === b);
    return `| ${b} | ${[...new Set(mine.map((r) => r.provider))].join(', ')} | ${median(mine.map((r) => r.idle_rss_mib)).toFixed(0)} | ${median(mine.map((r) => r.ready_s)).toFixed(1)} |`;
  }),
  '',
  ...runs.filter((r) => r.choice).map((r) => `- round ${r.round + 1}: ${r.choice.msg}`),
  '',
];
mkdirSync(join(here, 'results'), { recursive: true });
writeFileSync(join(here, `results/idle-rss-${SET}.json`), `${JSON.stringify({ when, set: SET, rounds: ROUNDS, runs }, null, 2)}\n`);
writeFileSync(join(here, `results/idle-rss-${SET}.md`), md.join('\n'));
console.log(md.join('\n'));
process.exit(0);
