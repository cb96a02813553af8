// /metrics scrape cost on the compiled build (npm run build first):
//   node bench/ops/metrics-scrape.mjs [scrapes] [workers]      (default 200, 2)
// Starts dist/src/main.js on a free port with a scratch DATA_DIR, scrapes /metrics
// sequentially and prints latency percentiles and the body size. Figures only.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const scrapes = Number(process.argv[2] ?? 200);
const workers = process.argv[3] ?? '2';
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-metrics-'));
const proc = spawn(process.execPath, ['dist/src/main.js'], {
  env: { ...process.env, HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir, WORKERS: workers, INFERENCE_THREADS: '1', WARMUP_RUNS: '0' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const port = await new Promise((resolve, reject) => {
  let buf = '';
  proc.stdout.on('data', (d) => {
    buf += d;
    const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(buf);
    if (m) resolve(Number(m[1]));
  });
  proc.on('exit', (c) => reject(new Error(`service exited ${c}`)));
});
const url = `http://127.0.0.1:${port}/metrics`;
for (let i = 0; i < 10; i++) await (await fetch(url)).text();
const ms = [];
let bytes = 0;
for (let i = 0; i < scrapes; i++) {
  const t = performance.now();
  bytes = (await (await fetch(url)).text()).length;
  ms.push(performance.now() - t);
}
proc.kill('SIGTERM');
await new Promise((r) => proc.on('exit', r));
fs.rmSync(dataDir, { recursive: true, force: true });
ms.sort((a, b) => a - b);
const q = (p) => +ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(2);
console.log(JSON.stringify({ scrapes, api_workers: Number(workers), p50_ms: q(0.5), p99_ms: q(0.99), max_ms: q(1), body_bytes: bytes }, null, 2));
