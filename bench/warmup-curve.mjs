// CPU per capture over the first minutes of a load: the compiled service on tiny128 (deployed
// as bench/side-by-side.mjs deploys it) and, with --peer fastapi, the FastAPI peer, each given
// one kind of the peers' load (load.mjs) in consecutive windows of --seconds (no warm-up of
// their own), from the first call on. Each window prints captures/s and CPU ms per capture
// (user + system of the system's process tree, /proc, over the window).
//
//   npm run build && PEERS_DIR=/tmp/peers-perf node bench/warmup-curve.mjs --kind single-png \
//     [--workers 16] [--concurrency 32] [--windows 15] [--seconds 10] [--peer fastapi] \
//     [--from DIR] [--port 18395] [--node-args "FLAGS"] [--out NAME]
//
// Why: every API worker is a V8 isolate that optimises the request path from its own share of
// the calls, so at 16 API workers the service's CPU per capture keeps falling for minutes of
// load (TurboFan compiles on V8's helper threads, code still in the baseline tier meanwhile:
// bench/results/cpu-warmup-w16-s51.md); a CPython peer has no such curve. A benchmark's
// window then measures the service at some point on that curve.
//
// The systems run one after the other (not interleaved): compare the shapes of the curves,
// and read levels against a host that stayed as loaded. Writes bench/results/NAME.{md,json}
// (NAME: warmup-curve-<kind>-w<workers>-c<concurrency>).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { deployTiny128, opt, peersFolder, requireBuildsAndPeers, ROOT, spawnService, startLogged, treeCpuSeconds, waitReady } from './tiny128-service.mjs';

const peers = peersFolder();
const KIND = opt('kind', 'single-png');
const WORKERS = Number(opt('workers', 16));
const CONCURRENCY = Number(opt('concurrency', 32));
const WINDOWS = Number(opt('windows', 15));
const SECONDS = Number(opt('seconds', 10));
const PEER = opt('peer', null);
const FROM = opt('from', ROOT);
const PORT = Number(opt('port', 18395));
// Extra node/V8 flags for the service's process (V8's are process-wide, so every isolate it
// starts gets them): for trying a tiering setting on the curve, e.g. --node-args "--always-sparkplug".
const NODE_ARGS = opt('node-args', '').split(' ').filter(Boolean);
const OUT = opt('out', `warmup-curve-${KIND}-w${WORKERS}-c${CONCURRENCY}`);
const PEER_TOKEN = 'bench-warmup-curve-token';

requireBuildsAndPeers([FROM], peers);
if (PEER !== null && PEER !== 'fastapi') {
  console.error('--peer: only fastapi');
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), 'warmup-curve-'));
const procs = new Set();
process.on('exit', () => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function start(cmd, args, opts) {
  const started = startLogged(cmd, args, opts);
  procs.add(started.proc);
  return started;
}

async function stop(proc) {
  if (proc.exitCode !== null) return;
  const gone = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
  await gone;
  clearTimeout(timer);
}

async function startService(port) {
  const { env, token } = deployTiny128(dir, peers, FROM);
  const { base, proc, log } = spawnService({ from: FROM, env, port, workers: WORKERS, nodeArgs: NODE_ARGS });
  procs.add(proc);
  await waitReady(base, proc, log);
  return { name: 'service', base, token, proc };
}

async function startFastapi(port) {
  const { proc, log } = start('/usr/bin/python3', ['serve.py', '--host', '127.0.0.1', '--port', String(port), '--workers', String(WORKERS)], {
    cwd: join(peers, 'fastapi'),
    env: { ...process.env, PEER_TOKEN, PORT: String(port), HOST: '127.0.0.1', PEER_WORKERS: String(WORKERS), PEER_THREADS: '1', PEER_MODEL: join(peers, 'model/tiny128.onnx') },
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, proc, log);
  return { name: 'fastapi', base, token: PEER_TOKEN, proc };
}

function window(sys) {
  return new Promise((resolve, reject) => {
    const cpu0 = treeCpuSeconds(sys.proc.pid);
    const load = spawn(process.execPath, [join(peers, 'load.mjs'), '--base', sys.base, '--token', sys.token, '--module', 'rgb_liveness',
      '--kind', KIND, '--concurrency', String(CONCURRENCY), '--seconds', String(SECONDS), '--warmup', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    load.stdout.on('data', (c) => (stdout += c));
    load.on('close', (code) => {
      const cpu1 = treeCpuSeconds(sys.proc.pid);
      if (code !== 0) return reject(new Error(`load.mjs failed (${code})`));
      const line = JSON.parse(stdout.trim().split('\n').pop());
      const captures = line.captures_per_s * SECONDS;
      resolve({ captures_per_s: line.captures_per_s, cpu_ms_per_capture: captures > 0 ? ((cpu1 - cpu0) * 1000) / captures : null, non200: line.non200_by_status ?? {}, load1: loadavg()[0] });
    });
  });
}

const curves = {};
for (const boot of [startService, ...(PEER === 'fastapi' ? [startFastapi] : [])]) {
  const sys = await boot(PORT);
  const rows = [];
  for (let w = 0; w < WINDOWS; w++) {
    const r = await window(sys);
    rows.push({ from_s: w * SECONDS, ...r });
    console.error(`${sys.name} ${w * SECONDS}-${(w + 1) * SECONDS} s: ${r.captures_per_s} captures/s, ${r.cpu_ms_per_capture?.toFixed(2)} ms CPU a capture, load ${r.load1.toFixed(1)}`);
  }
  curves[sys.name] = rows;
  await stop(sys.proc);
}

const names = Object.keys(curves);
const result = { when: new Date().toISOString(), kind: KIND, workers: WORKERS, concurrency: CONCURRENCY, seconds: SECONDS, windows: WINDOWS, build: FROM, curves };
const cmd = `PEERS_DIR=${process.env.PEERS_DIR ?? '../shared/peers'} node bench/warmup-curve.mjs ${process.argv.slice(2).join(' ')}`;
const md = [
  `# CPU per capture over the first minutes of load: ${KIND}, WORKERS=${WORKERS}, concurrency ${CONCURRENCY} (${result.when})`,
  '',
  `Command: \`${cmd}\` (build: ${FROM}). Consecutive ${SECONDS}-s windows of load.mjs from the first call; the systems one after the other.`,
  '',
  `| load since (s) | ${names.map((n) => `${n}: captures/s | ${n}: CPU ms a capture`).join(' | ')} | 1-min load |`,
  `|---|${names.map(() => '---|---').join('|')}|---|`,
  ...Array.from({ length: WINDOWS }, (_, w) => `| ${w * SECONDS} | ${names.map((n) => `${curves[n][w].captures_per_s} | ${curves[n][w].cpu_ms_per_capture?.toFixed(2) ?? '–'}`).join(' | ')} | ${names.map((n) => curves[n][w].load1.toFixed(1)).join(' / ')} |`),
  '',
];
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(join(ROOT, 'bench/results', `${OUT}.md`), md.join('\n'));
writeFileSync(join(ROOT, 'bench/results', `${OUT}.json`), `${JSON.stringify(result, null, 2)}\n`);
console.log(md.join('\n'));
