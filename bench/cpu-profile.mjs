// Where the service's CPU goes per capture, thread by thread: the compiled service on tiny128
// (deployed as bench/side-by-side.mjs deploys it) started under V8's sampling profiler
// (`node --cpu-prof`, which every worker thread inherits: one profile per thread), one kind of
// the peers' load (load.mjs) for a warm-up and a measured window, then a clean stop (SIGTERM)
// so every thread writes its profile. Samples outside the measured window are dropped; the
// rest are summed per thread kind (main, API worker, inference, LMDB writer) and per function
// (self time), and given in ms per capture answered 200, beside the process's CPU per capture
// read from /proc over the same window (user + system, every thread).
//
//   npm run build && PEERS_DIR=/tmp/peers-perf node bench/cpu-profile.mjs --kind single-png \
//     [--workers 16] [--concurrency 32] [--seconds 10] [--warmup 3] [--from DIR] [--top 30] \
//     [--interval-us 500] [--keep DIR] [--port 18380] [--out NAME]
//
// Read the figures as sampled wall time of a thread that was on its stack: V8 samples a thread
// that is running or runnable (on an overloaded host a thread waiting for a core is sampled as
// running) and one blocked inside a native call (an fdatasync shows as the JavaScript function
// that called it); an event loop waiting for work is `(idle)` (or `(program)` between turns).
// The /proc figure is the CPU. The profiler costs some CPU itself: compare builds profiled
// alike, not a profiled run with an unprofiled one.
//
// Writes bench/results/NAME.md and NAME.json (NAME: cpu-profile-<kind>-w<workers>-c<concurrency>).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { deployTiny128, exitIfPortServed, opt, peersFolder, processCpuSeconds, requireBuildsAndPeers, ROOT, spawnService, waitReady } from './tiny128-service.mjs';

const peers = peersFolder();
const KIND = opt('kind', 'single-png');
const WORKERS = Number(opt('workers', 16));
const CONCURRENCY = Number(opt('concurrency', 32));
const SECONDS = Number(opt('seconds', 10));
const WARMUP = Number(opt('warmup', 3));
const TOP = Number(opt('top', 30));
const INTERVAL_US = Number(opt('interval-us', 500));
const FROM = opt('from', ROOT);
const KEEP = opt('keep', null);
const OUT = opt('out', `cpu-profile-${KIND}-w${WORKERS}-c${CONCURRENCY}`);

requireBuildsAndPeers([FROM], peers);

/** microseconds on the clock V8's profiles use (CLOCK_MONOTONIC) */
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

const dir = mkdtempSync(join(tmpdir(), 'cpu-profile-'));
const profiles = KEEP ?? join(dir, 'profiles');
mkdirSync(profiles, { recursive: true });
let service = null;
process.on('exit', () => {
  if (service && service.exitCode === null) service.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const { env, token } = deployTiny128(dir, peers, FROM);
const PORT = Number(opt('port', 18380));
const base = `http://127.0.0.1:${PORT}`;
await exitIfPortServed(base, PORT);
const svc = spawnService({ from: FROM, env, port: PORT, workers: WORKERS, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profiles}`, `--cpu-prof-interval=${INTERVAL_US}`] });
service = svc.proc;
await waitReady(base, service, svc.log);

// The load: warm-up, then the window; its bounds are taken when load.mjs's warm-up
// ends (its first stderr line marks its start) and when it exits.
const load = spawn(process.execPath, [join(peers, 'load.mjs'), '--base', base, '--token', token, '--module', 'rgb_liveness',
  '--kind', KIND, '--concurrency', String(CONCURRENCY), '--seconds', String(SECONDS), '--warmup', String(WARMUP)], { stdio: ['ignore', 'pipe', 'pipe'] });
let stdout = '';
let started = false;
let win = null;
let timer;
load.stdout.on('data', (c) => (stdout += c));
load.stderr.on('data', () => {
  if (started) return;
  started = true;
  timer = setTimeout(() => (win = { fromUs: nowUs(), cpu0: processCpuSeconds(service.pid), load0: loadavg()[0] }), WARMUP * 1000);
});
const code = await new Promise((r) => load.on('close', r));
clearTimeout(timer);
if (code !== 0 || !win) throw new Error(`load.mjs failed (${code})`);
win.toUs = nowUs();
win.cpu1 = processCpuSeconds(service.pid);
const line = JSON.parse(stdout.trim().split('\n').pop());
const captures = line.captures_per_s * SECONDS;

const gone = new Promise((r) => service.once('exit', r));
service.kill('SIGTERM');
const kill = setTimeout(() => service.kill('SIGKILL'), 60_000);
await gone;
clearTimeout(kill);

// ---------------------------------------------------------------- the profiles

/** Which thread a profile is, by the bundle its code came from. */
function threadKind(file, nodes) {
  const tid = Number(basename(file).split('.')[4]);
  if (tid === 0) return 'main';
  const urls = new Set(nodes.map((n) => n.callFrame.url));
  const has = (s) => [...urls].some((u) => u.includes(s));
  if (has('inference.bundle') || has('workers/inference')) return 'inference';
  if (has('lmdb-writer.bundle') || has('writer-thread')) return 'lmdb-writer';
  if (has('worker.bundle') || has('src/worker')) return 'api';
  return 'other';
}

const kinds = new Map(); // kind -> { threads, totalUs, byFn: Map }
for (const file of readdirSync(profiles).filter((f) => f.endsWith('.cpuprofile'))) {
  const p = JSON.parse(readFileSync(join(profiles, file), 'utf8'));
  const kind = threadKind(file, p.nodes);
  const k = kinds.get(kind) ?? { threads: 0, totalUs: 0, byFn: new Map() };
  kinds.set(kind, k);
  k.threads++;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i];
    if (t < win.fromUs || t > win.toUs) continue;
    // a sample stands for the time until the next one
    const dt = i + 1 < p.timeDeltas.length ? p.timeDeltas[i + 1] : INTERVAL_US;
    const cf = byId.get(p.samples[i]).callFrame;
    const where = cf.url ? basename(cf.url) : '';
    const key = `${cf.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    k.byFn.set(key, (k.byFn.get(key) ?? 0) + dt);
    k.totalUs += dt;
  }
}

const perCapture = (us) => us / 1000 / captures;
const IDLE = new Set(['(idle)', '(program)']);
const f2 = (n) => n.toFixed(2);
const cpuMs = ((win.cpu1 - win.cpu0) * 1000) / captures;
const result = {
  when: new Date().toISOString(), kind: KIND, workers: WORKERS, concurrency: CONCURRENCY, seconds: SECONDS, warmup: WARMUP, from: FROM,
  interval_us: INTERVAL_US, load: line, captures, cpu_ms_per_capture: cpuMs, load1: [win.load0, loadavg()[0]],
  threads: Object.fromEntries([...kinds].map(([kind, k]) => [kind, {
    threads: k.threads,
    sampled_ms_per_capture: perCapture(k.totalUs),
    busy_ms_per_capture: perCapture([...k.byFn].filter(([fn]) => !IDLE.has(fn.split(' ')[0])).reduce((s, [, us]) => s + us, 0)),
    top: [...k.byFn].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([fn, us]) => ({ fn, ms_per_capture: perCapture(us) })),
  }])),
};
const md = [
  `# CPU profile: ${KIND}, WORKERS=${WORKERS}, concurrency ${CONCURRENCY} (${result.when})`,
  '',
  `Command: \`${process.env.PEERS_DIR ? `PEERS_DIR=${process.env.PEERS_DIR} ` : ''}node bench/cpu-profile.mjs ${process.argv.slice(2).join(' ')}\` ` +
    `(build: ${FROM}). ${line.captures_per_s} captures/s answered 200 over ${SECONDS} s after ${WARMUP} s of warm-up ` +
    `(${JSON.stringify(line.non200_by_status)} non-200), p50 ${line.p50_ms} ms, p99 ${line.p99_ms} ms. ` +
    `Process CPU (/proc, every thread, profiler included): **${f2(cpuMs)} ms per capture**. ` +
    `Host: ${availableParallelism()} cores, 1-min load average ${win.load0.toFixed(1)} -> ${loadavg()[0].toFixed(1)}.`,
  '',
  '| thread kind | threads | sampled ms per capture | of it not idle |',
  '|---|---|---|---|',
  ...Object.entries(result.threads).map(([kind, t]) => `| ${kind} | ${t.threads} | ${f2(t.sampled_ms_per_capture)} | ${f2(t.busy_ms_per_capture)} |`),
  '',
  ...Object.entries(result.threads).flatMap(([kind, t]) => [
    `## ${kind}: self time, ms per capture (top ${TOP})`,
    '',
    '| function | ms |',
    '|---|---|',
    ...t.top.map((r) => `| \`${r.fn.replace(/\|/g, '\\|')}\` | ${r.ms_per_capture.toFixed(3)} |`),
    '',
  ]),
];
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(join(ROOT, `bench/results/${OUT}.json`), `${JSON.stringify(result, null, 2)}\n`);
writeFileSync(join(ROOT, `bench/results/${OUT}.md`), `${md.join('\n')}\n`);
console.log(md.slice(0, 12 + Object.keys(result.threads).length).join('\n'));
console.error(`written: bench/results/${OUT}.md, .json`);
