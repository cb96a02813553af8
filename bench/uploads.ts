// Slow-link upload benchmark (issue 15, "Cheap API workers"): the compiled service (dist/, run
// `npm run build` first) with the peers' tiny128 graph deployed by manifest as a model set in
// a temporary MODELS_DIR; CLIENTS clients each upload ROUNDS 20-frame sequences (the peers'
// load.mjs body, 3.6 MB) paced at RATE bytes/s, all at once. Reports answers by status, the
// service's RSS (idle and peak, sampled), and the idle RSS at WORKERS=2 with the split between
// the API workers and the rest (main thread + inference pool) taken from two idle runs.
//
//   node --import tsx bench/uploads.ts [--workers 32] [--clients 64] [--rate 409600] [--rounds 2] [--quick]
//   node --import tsx bench/uploads.ts --big
//
// --big (issue 10's memory target): WORKERS=2, 8 clients each sending, unpaced, a 93-frame rgb8
// sequence (28.6 MB, near the 32 MiB body limit) ROUNDS times; a client answered 503 retries
// after a short pause, as a device would. Reports the peak RSS over idle in bodies (target: at
// most 5 bodies over idle).
//
// Every client sends its own X-Forwarded-For (the service trusts the loopback proxy here),
// so the per-address cap applies as it would to a fleet; the clients are split over two
// tokens so the per-token cap (3/4 of the slots by default) is not what limits them.

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error plain JavaScript module without types
import { PRODUCTION_ENV } from './production-env.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PEERS = path.resolve(ROOT, '../shared/peers');

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const quick = process.argv.includes('--quick');
const big = process.argv.includes('--big');
const WORKERS = arg('workers', big ? 2 : 32);
const CLIENTS = arg('clients', big ? 8 : quick ? 16 : 64);
const RATE = arg('rate', big ? 1e12 : 400 * 1024);
const BIG_FRAMES = 93;
const ROUNDS = arg('rounds', quick ? 1 : 2);
const TICK_MS = 50;

const MiB = 1024 * 1024;
const main = path.join(ROOT, 'dist/src/main.js');
const cli = path.join(ROOT, 'dist/src/cli/main.js');
if (!fs.existsSync(main)) {
  console.error('dist/ is missing: run `npm run build` first (benchmarks run the compiled service)');
  process.exit(2);
}

function modelsDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-models-'));
  fs.mkdirSync(path.join(dir, 'tiny128'));
  fs.copyFileSync(path.join(PEERS, 'model/tiny128.onnx'), path.join(dir, 'tiny128/tiny128.onnx'));
  fs.copyFileSync(path.join(PEERS, 'model/tiny128.manifest.json'), path.join(dir, 'tiny128/manifest.json'));
  return dir;
}

function runCli(env: NodeJS.ProcessEnv, args: string[]): Promise<any> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('close', (code) => (code === 0 ? resolve(out ? JSON.parse(out) : null) : reject(new Error(`cli ${args.join(' ')}: ${err}`))));
  });
}

function rssKiB(pid: number): { rss: number; hwm: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const get = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: get('VmRSS'), hwm: get('VmHWM') };
}

interface Service {
  proc: ChildProcess;
  port: number;
  env: NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

async function startService(workers: number): Promise<Service> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-data-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env, ...PRODUCTION_ENV, HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir, WORKERS: String(workers), MODELS_DIR: modelsDir(), MODEL_SET: 'tiny128',
    TRUSTED_PROXIES: '127.0.0.1', LOG_LEVEL: 'info', WARMUP_RUNS: '5',
  };
  // tiny128 describes rgb_liveness only
  await runCli(env, ['module', 'disable', 'color_liveness']);
  const proc = spawn(process.execPath, [main], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let errText = '';
  proc.stderr!.on('data', (d) => (errText += d));
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /"msg":"listening"[^\n]*/.exec(buf) ?? /[^\n]*"msg":"listening"/.exec(buf);
      if (m) {
        const line = buf.split('\n').find((l) => l.includes('"msg":"listening"'))!;
        resolve(JSON.parse(line).port);
      }
      if (buf.length > 1 << 20) buf = buf.slice(-4096);
    });
    proc.on('exit', (code) => reject(new Error(`service exited ${code}: ${errText}`)));
  });
  const end = Date.now() + 120_000;
  for (;;) {
    const r = await fetch(`http://127.0.0.1:${port}/health/ready`).catch(() => null);
    if (r?.status === 200) break;
    if (Date.now() > end) throw new Error('service not ready');
    await new Promise((res) => setTimeout(res, 250));
  }
  return {
    proc, port, env,
    stop: () => new Promise((resolve) => {
      proc.once('exit', () => {
        fs.rmSync(dataDir, { recursive: true, force: true });
        resolve();
      });
      proc.kill('SIGTERM');
    }),
  };
}

function resetHighWaterMark(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Idle RSS: sampled until two readings a second apart agree within 1 MiB (bounded). */
async function idleRss(pid: number): Promise<number> {
  let last = rssKiB(pid).rss;
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = rssKiB(pid).rss;
    if (Math.abs(now - last) < 1024) return now;
    last = now;
  }
  return last;
}

async function upload(port: number, token: string, address: string, body: Buffer, contentType: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let answer = '';
  let answered = false;
  const status = new Promise<number>((resolve) => {
    socket.on('data', (d) => {
      answer += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (m && answer.includes('\r\n\r\n')) {
        answered = true;
        resolve(Number(m[1]));
      }
    });
    // a refused upload (503) is answered while the client still writes; the server then closes
    // (Connection: close), so the client's next write may fail after the status line arrived
    const seen = () => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? -1);
    socket.on('error', () => resolve(seen()));
    socket.on('close', () => resolve(seen()));
  });
  socket.write(
    `POST /v1/modules/rgb_liveness/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nX-Forwarded-For: ${address}\r\n` +
      `Content-Type: ${contentType}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
  );
  // paced: RATE bytes/s in TICK_MS slices, catching up after a late timer so the average holds
  const t0 = performance.now();
  let sent = 0;
  while (sent < body.length && !answered && !socket.destroyed) {
    const due = Math.min(body.length, Math.ceil(((performance.now() - t0 + TICK_MS) / 1000) * RATE));
    if (due > sent) {
      socket.write(body.subarray(sent, due));
      sent = due;
    }
    await new Promise((r) => setTimeout(r, TICK_MS));
  }
  const code = await status;
  socket.destroy();
  return { status: code, ms: performance.now() - started };
}

async function run(): Promise<void> {
  const { buildRequest, multipartBody, makePart, okFrame, packet } = await import(path.join(PEERS, 'load.mjs'));
  let req = buildRequest('sequence20');
  if (big) {
    const parts = Array.from({ length: BIG_FRAMES }, (_, i) => makePart(`f${i}`, 'rgb8', i + 1));
    req = { metadata: packet('big-sequence', 'rgb_sequence', parts.map((p: { image: unknown }, i: number) => okFrame(i, p.image))), parts };
  }
  const { body, contentType } = multipartBody(req.metadata, req.parts) as { body: Buffer; contentType: string };

  // idle at WORKERS=2, then the benchmark's size
  let idle2 = 0;
  if (WORKERS !== 2) {
    const small = await startService(2);
    idle2 = await idleRss(small.proc.pid!);
    await small.stop();
  }

  const svc = await startService(WORKERS);
  const pid = svc.proc.pid!;
  const idleW = await idleRss(pid);
  if (WORKERS === 2) idle2 = idleW;
  const perWorker = WORKERS === 2 ? NaN : (idleW - idle2) / (WORKERS - 2);
  const tokens = [
    (await runCli(svc.env, ['token', 'create', '--name', 'bench-a', '--grant', 'rgb_liveness:unlimited:day'])).token,
    (await runCli(svc.env, ['token', 'create', '--name', 'bench-b', '--grant', 'rgb_liveness:unlimited:day'])).token,
  ];

  // VmHWM so far is the start-up's (V8 compiling the wasm runtime in the inference threads,
  // bench/results/uploads-runs.md "Start-up peak"), which settles back to idle before the first body arrives. Writing 5 to clear_refs resets the high-water
  // mark (Linux >= 4.0), so the peak below is the load's; the start-up peak is reported apart.
  const startupHwm = rssKiB(pid).hwm;
  const hwmReset = resetHighWaterMark(pid);
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssKiB(pid).rss);
  }, 100);
  const started = performance.now();
  const outcomes = await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => {
      const results: { status: number; ms: number }[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        let o = await upload(svc.port, tokens[i % 2]!, `198.18.${i >> 8}.${i & 255}`, body, contentType);
        // --big: more clients than slots on purpose; a refused device retries (bounded)
        for (let retry = 0; big && o.status === 503 && retry < 200; retry++) {
          await new Promise((res) => setTimeout(res, 100 + Math.random() * 200));
          o = await upload(svc.port, tokens[i % 2]!, `198.18.${i >> 8}.${i & 255}`, body, contentType);
        }
        results.push(o);
      }
      return results;
    }),
  );
  const wall = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, rssKiB(pid).rss);
  const hwm = rssKiB(pid).hwm;
  await svc.stop();

  const all = outcomes.flat();
  const byStatus: Record<string, number> = {};
  for (const o of all) byStatus[o.status] = (byStatus[o.status] ?? 0) + 1;
  const ms = all.map((o) => o.ms).sort((a, b) => a - b);
  const report = {
    at: new Date().toISOString(),
    host: `${os.cpus().length} cores, ${Math.round(os.totalmem() / 1024 ** 3)} GiB`,
    node: process.version,
    workers: WORKERS,
    clients: CLIENTS,
    rounds: ROUNDS,
    rate_bytes_per_s: RATE,
    body_bytes: body.length,
    requests: all.length,
    by_status: byStatus,
    ok: byStatus['200'] ?? 0,
    busy_503: byStatus['503'] ?? 0,
    errors: all.length - (byStatus['200'] ?? 0),
    wall_s: Math.round(wall * 10) / 10,
    upload_ms_p50: Math.round(ms[Math.floor(ms.length / 2)]!),
    upload_ms_max: Math.round(ms[ms.length - 1]!),
    idle_rss_mib_workers_2: Math.round(idle2 / 1024),
    idle_rss_mib: Math.round(idleW / 1024),
    per_api_worker_mib: Math.round((perWorker / 1024) * 10) / 10,
    main_and_inference_pool_mib: Math.round((idle2 - 2 * perWorker) / 1024),
    peak_rss_mib_sampled: Math.round(peak / 1024),
    peak_rss_mib_hwm: Math.round(hwm / 1024),
    // the high-water mark covers the load only where the reset worked; otherwise start-up too
    peak_hwm_covers: hwmReset ? 'load' : 'start-up and load',
    startup_peak_rss_mib_hwm: Math.round(startupHwm / 1024),
    rss_under_1_gib: hwm < 1024 * 1024,
    peak_over_idle_in_bodies: Math.round(((hwm - idleW) * 1024 / body.length) * 100) / 100,
  };
  console.log(JSON.stringify(report, null, 2));
  const out = path.join(ROOT, 'bench/results', big ? 'uploads-big.json' : quick ? 'uploads-quick.json' : 'uploads.json');
  fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote ${path.relative(ROOT, out)}`);
  if (report.errors > 0 || (big ? report.peak_over_idle_in_bodies > 5 : !report.rss_under_1_gib)) process.exitCode = 1;
}

await run();
