// Side-by-side: this service (compiled build) against the two peers of ../shared/peers on
// the same graph (tiny128.onnx, deployed in the service by manifest) and the same client
// (load.mjs), all on loopback, WORKERS=2 / PEER_WORKERS=2, concurrency 4. Rounds are
// interleaved (every kind on every system, system order rotated each round) so drift in
// the shared machine's load hits all systems alike; the report gives medians and ratios.
//
//   npm run build && node bench/side-by-side.mjs [--rounds 3] [--seconds 10] [--warmup 2] [--quick]
//     [--concurrency 4] [--workers 2] [--baseline DIR] [--flushes] [--service-only] [--traces] [--out NAME]
//
// --flushes runs each service build under `strace -f --seccomp-bpf -e trace=fdatasync,fsync`
// (stopped only at those calls) and prints the disk syncs per charged call: the syncs of a
// round over the settlements of that round (lv_verify_step_seconds_count{step="settle"}).
// Each LMDB commit that syncs is one fdatasync of the data file, then its meta page through an
// O_DSYNC descriptor (not counted). The tracer slows every sync a little: compare captures/s
// of such a run among the traced builds only.
//
// Every system's CPU per capture (user + system time of its processes in each measured window,
// over the captures answered 200) is printed beside its captures/s.
//
// Writes bench/results/side-by-side.{json,md,svg} (--out NAME: NAME.{json,md,svg}). Plain JavaScript on purpose: the
// service is measured as it runs in production, and the driver adds no loader.
// A peer whose dependencies are not installed (peers/fastify: `npm ci`; FastAPI:
// peers/fastapi/install.sh) is reported as not run, with the reason; nothing is assumed.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRODUCTION_ENV } from './production-env.mjs';
import { treeCpuSeconds } from './tiny128-service.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
// real path: load.mjs runs only when argv[1] is its own resolved path (../shared is a link)
// PEERS_DIR: a writable copy of ../shared/peers (its fastify/ needs `npm ci`, which cannot run
// in the read-only shared folder): `cp -r ../shared/peers /tmp/peers && (cd /tmp/peers/fastify && npm ci)`
const peersDir = process.env.PEERS_DIR ?? join(root, '../shared/peers');
const peers = existsSync(peersDir) ? realpathSync(peersDir) : peersDir;
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const quick = process.argv.includes('--quick');
const ROUNDS = arg('rounds', quick ? 1 : 3);
const SECONDS = arg('seconds', quick ? 3 : 10);
const WARMUP = arg('warmup', quick ? 1 : 2);
const CONCURRENCY = arg('concurrency', 4);
// --workers N: the service's WORKERS and the peers' PEER_WORKERS (2 unless given)
const WORKERS = arg('workers', 2);
// --set raw_v1: the service alone on its shipped set (the peers only serve tiny128), for
// the service / bare-inference table; bench/engine.mjs gives the bare side.
const si = process.argv.indexOf('--set');
const SET = si > 0 ? process.argv[si + 1] : 'tiny128';
const FLUSHES = process.argv.includes('--flushes');
const oi = process.argv.indexOf('--out');
const OUT = oi > 0 ? process.argv[oi + 1] : SET === 'tiny128' ? 'side-by-side' : `service-${SET}`;
const bi = process.argv.indexOf('--baseline');
const BASELINE = bi > 0 ? process.argv[bi + 1] : null;
// --traces: this build three times, tracing off, on at 10 % and at 100 %
// (parentbased_traceidratio), exporting to an OTLP/HTTP sink in a child process that takes
// every export with a 200 (docs/observability.md, Traces)
const TRACES = process.argv.includes('--traces');

/** A port nothing listens on now, the system's pick. Every system of a run, and the traces'
 * sink, gets its own: with fixed ports a second run at the same time, or a system an earlier
 * run left behind, answered on this run's port, and the figures were another process's. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
const SINK_PORT = TRACES ? await freePort() : 0;
const traceEnv = (ratio) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${SINK_PORT}`, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio,
});
const KINDS = (process.env.KINDS ?? 'single-png single-rgb8 sequence20 batch32').split(/\s+/).filter(Boolean);
const TOKEN = 'bench-side-by-side-token';

if (!existsSync(join(root, 'dist/src/main.js'))) {
  console.error('bench/side-by-side.mjs runs the compiled service: `npm run build` first');
  process.exit(2);
}
if (!existsSync(join(peers, 'load.mjs'))) {
  console.error(`no peers at ${peers}`);
  process.exit(2);
}

const children = new Set();
function stopAll() {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
}
process.on('exit', stopAll);
process.on('SIGINT', () => process.exit(130));

async function waitReady(base, proc, name, log, timeoutMs = 240_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (proc.exitCode !== null) throw new Error(`${name} exited (${proc.exitCode}) before it was ready:\n${log.join('').slice(-2000)}`);
    try {
      const r = await fetch(`${base}/health/ready`);
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${name} not ready within ${timeoutMs / 1000} s`);
}

function start(name, cmd, args, opts) {
  const log = [];
  const proc = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d) => log.push(String(d)));
  proc.stderr.on('data', (d) => log.push(String(d)));
  children.add(proc);
  return { proc, log };
}

async function stop(proc) {
  if (proc.exitCode !== null) return;
  const gone = new Promise((r) => proc.once('exit', r));
  // strace holds SIGTERM while it traces: the service under it is told, and strace follows it
  const traced = proc.traced ? spawnSync('ps', ['--ppid', String(proc.pid), '-o', 'pid='], { encoding: 'utf8' }).stdout.trim() : '';
  if (traced) process.kill(Number(traced), 'SIGTERM');
  else proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
  await gone;
  clearTimeout(timer);
}

/** Whether a build of the service reads a graph's `resize` field (its compiled manifest
 * schema names the bilinear kind). */
function knowsResizeField(from) {
  try {
    return readFileSync(join(from, 'dist/src/inference/manifest.js'), 'utf8').includes("'bilinear'");
  } catch {
    return false;
  }
}

/** The service on tiny128, deployed the way peers/README.md says. `from`: another build of
 * the service (--baseline DIR, e.g. an older commit's `npm run build`) to compare with. */
async function startService(port, from = root, name = 'service', extraEnv = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'side-by-side-'));
  let modelsDir = join(from, 'models');
  if (SET === 'tiny128') {
    modelsDir = join(dir, 'models');
    const models = join(modelsDir, 'tiny128');
    mkdirSync(models, { recursive: true });
    copyFileSync(join(peers, 'model/tiny128.onnx'), join(models, 'tiny128.onnx'));
    const manifest = JSON.parse(readFileSync(join(peers, 'model/tiny128.manifest.json'), 'utf8'));
    // The peers resize bilinearly (OpenCV INTER_LINEAR) and the manifest's description says
    // so; this service's default is area, so the deployment names it, for this build and for
    // a --baseline build that knows the field (else that one would be measured on the costlier
    // area resize). A build from before the field existed gets the file unchanged (it resized
    // 320 -> 128 bilinearly too).
    if (knowsResizeField(from)) for (const g of manifest.modules.rgb_liveness.graphs) g.resize = 'bilinear';
    writeFileSync(join(models, 'manifest.json'), JSON.stringify(manifest, null, 2));
  }
  const env = { ...process.env, ...PRODUCTION_ENV, DATA_DIR: join(dir, 'data'), MODELS_DIR: modelsDir, MODEL_SET: SET, LOG_LEVEL: 'warn' };
  const cli = (...a) => {
    const r = spawnSync(process.execPath, [join(from, 'dist/src/cli/main.js'), ...a], { cwd: from, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cli ${a.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  if (SET === 'tiny128') cli('module', 'disable', 'color_liveness'); // tiny128 does not describe it
  const token = JSON.parse(cli('token', 'create', '--name', 'bench', '--grant', 'rgb_liveness:unlimited:never')).token;
  const main = [join(from, 'dist/src/main.js')];
  const traceFile = FLUSHES ? join(dir, 'syncs.txt') : null;
  const [cmd, args] = traceFile ? ['strace', ['-f', '-qq', '--seccomp-bpf', '-e', 'trace=fdatasync,fsync', '-o', traceFile, process.execPath, ...main]] : [process.execPath, main];
  const { proc, log } = start(name, cmd, args, {
    cwd: from, env: { ...env, ...extraEnv, HOST: '127.0.0.1', PORT: String(port), WORKERS: String(WORKERS) },
  });
  proc.traced = traceFile !== null;
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, proc, name, log);
  return { name, base, token, proc, traceFile, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

function peerEnv(port) {
  return { ...process.env, PEER_TOKEN: TOKEN, PORT: String(port), HOST: '127.0.0.1', PEER_WORKERS: String(WORKERS), PEER_THREADS: '1', PEER_MODEL: join(peers, 'model/tiny128.onnx') };
}

async function startFastify(port) {
  if (!existsSync(join(peers, 'fastify/node_modules'))) return { name: 'fastify', skipped: 'peers/fastify has no node_modules (run `npm ci` there)' };
  const { proc, log } = start('fastify', process.execPath, ['server.mjs'], { cwd: join(peers, 'fastify'), env: peerEnv(port) });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, proc, 'fastify', log);
  return { name: 'fastify', base, token: TOKEN, proc };
}

async function startFastapi(port) {
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import fastapi, uvicorn, cv2, PIL, numpy, multipart'], { encoding: 'utf8' });
  if (probe.status !== 0) return { name: 'fastapi', skipped: `Debian python3 lacks the FastAPI peer's packages (peers/fastapi/install.sh): ${(probe.stderr || probe.error?.message || '').trim().split('\n').pop()}` };
  // serve.py: uvicorn with TCP_NODELAY, the FastAPI baseline peers/README.md recommends
  const { proc, log } = start('fastapi', '/usr/bin/python3', ['serve.py', '--host', '127.0.0.1', '--port', String(port), '--workers', String(WORKERS)], {
    cwd: join(peers, 'fastapi'), env: peerEnv(port),
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, proc, 'fastapi', log);
  return { name: 'fastapi', base, token: TOKEN, proc };
}


/** One load run against `sys`, with the CPU the system spent in its measured window: read when
 * load.mjs starts its warm-up (its first stderr line) plus the warm-up, and again when it
 * exits. CPU per capture is that over the captures answered 200 in the window; the few calls
 * still in flight at the window's end add a little to it. */
async function runLoad(sys, kind) {
  const child = spawn(process.execPath, [join(peers, 'load.mjs'), '--base', sys.base, '--token', sys.token, '--module', 'rgb_liveness',
    '--kind', kind, '--concurrency', String(CONCURRENCY), '--seconds', String(SECONDS), '--warmup', String(WARMUP)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let cpuStart = null;
  let timer;
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => {
    if (stderr === '') timer = setTimeout(() => (cpuStart = treeCpuSeconds(sys.proc.pid)), WARMUP * 1000);
    stderr += c;
  });
  const code = await new Promise((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  const cpuEnd = treeCpuSeconds(sys.proc.pid);
  if (code !== 0) throw new Error(`load.mjs against ${sys.name}: ${stderr}`);
  const line = JSON.parse(stdout.trim().split('\n').pop());
  const busy = line.non200_by_status['503'] ?? 0;
  const captures = line.captures_per_s * SECONDS;
  const cpu_ms_per_capture = cpuStart !== null && cpuEnd !== null && captures > 0 ? ((cpuEnd - cpuStart) * 1000) / captures : null;
  return { ...line, share_503: line.requests ? busy / line.requests : 0, cpu_ms_per_capture };
}

const STEPS = ['accept', 'receive', 'validate', 'reserve', 'infer', 'settle', 'respond'];

/** The disk syncs a traced service has made so far (one line of strace's output each). */
function syncsSoFar(sys) {
  if (!sys.traceFile || !existsSync(sys.traceFile)) return 0;
  return readFileSync(sys.traceFile, 'utf8').split('\n').filter((l) => /\b(fdatasync|fsync)\(/.test(l)).length;
}

/** The service's lv_verify_step_seconds sums and counts (loopback reads /metrics without a
 * token), so a run's mean time per step is the difference of two readings. */
async function stepTotals(sys) {
  let text;
  try {
    text = await (await fetch(`${sys.base}/metrics`)).text();
  } catch {
    // undici may reuse a keep-alive connection the service has just closed (it closes idle
    // ones, and sheds some after verify answers): one retry on a fresh connection
    text = await (await fetch(`${sys.base}/metrics`)).text();
  }
  const out = {};
  for (const m of text.matchAll(/^lv_verify_step_seconds_(sum|count)\{step="(\w+)"\} (\S+)$/gm)) {
    out[m[2]] ??= { sum: 0, count: 0 };
    out[m[2]][m[1]] += Number(m[3]);
  }
  return out;
}

function stepMeans(before, after) {
  const means = {};
  for (const step of STEPS) {
    const a = after[step] ?? { sum: 0, count: 0 };
    const b = before[step] ?? { sum: 0, count: 0 };
    const n = a.count - b.count;
    means[step] = n > 0 ? ((a.sum - b.sum) / n) * 1000 : null;
  }
  return means;
}

/** null when `sys` answers one request of every kind with 200, else what it answered. */
function probeAnswers(sys) {
  for (const kind of KINDS) {
    // A window with no answer at all is no fault: on a busy host one sequence20 call can take
    // longer than a second. Only non-200 answers (or none in a long window) drop a system.
    for (const seconds of [1, 5, 20]) {
      const r = spawnSync(process.execPath, [join(peers, 'load.mjs'), '--base', sys.base, '--token', sys.token, '--module', 'rgb_liveness',
        '--kind', kind, '--concurrency', '1', '--seconds', String(seconds), '--warmup', '0'], { encoding: 'utf8' });
      if (r.status !== 0) return `load.mjs failed: ${r.stderr.trim().split('\n').pop()}`;
      const line = JSON.parse(r.stdout.trim().split('\n').pop());
      if (line.ok) break;
      if (line.requests > 0 || seconds === 20) return `${kind}: ${JSON.stringify(line.non200_by_status)}`;
    }
  }
  return null;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const systems = [];
const skipped = [];
try {
  // --service-only: no peers (a --flushes run compares the service's builds with each other)
  const boots = SET === 'tiny128' && !process.argv.includes('--service-only') ? [startService, startFastify, startFastapi] : [startService];
  if (BASELINE) boots.splice(1, 0, (port) => startService(port, BASELINE, 'service-before'));
  if (TRACES) {
    const sink = spawn(process.execPath, ['-e', `require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => r.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()); }).listen(${SINK_PORT}, '127.0.0.1')`], { stdio: 'ignore' });
    // unref'd: a child with a handle keeps this process's event loop alive, so the run would never
    // reach 'exit' (where stopAll ends the sink) once its report is written
    sink.unref();
    children.add(sink);
    boots.push((port) => startService(port, root, 'service-traces-10', traceEnv('0.1')), (port) => startService(port, root, 'service-traces-100', traceEnv('1')));
  }
  for (const boot of boots) {
    const s = await boot(await freePort());
    if (!s.skipped) {
      // A system that cannot answer the benchmark's requests (a peer on a library version it
      // was not written for, say) is reported as not run, with its first failure, instead of
      // a row of zeros that reads like a measurement.
      const fault = probeAnswers(s);
      if (fault) {
        await stop(s.proc);
        s.cleanup?.();
        s.skipped = `answered no request of the benchmark with 200 (${fault})`;
      }
    }
    if (s.skipped) {
      skipped.push({ name: s.name, skipped: s.skipped });
      console.error(`side-by-side: ${s.name} not run: ${s.skipped}`);
    } else {
      systems.push(s);
      console.error(`side-by-side: ${s.name} ready on ${s.base}`);
    }
  }
  const runs = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of KINDS) {
      const order = systems.map((_, i) => systems[(i + round) % systems.length]);
      for (const sys of order) {
        const before = sys.name.startsWith('service') ? await stepTotals(sys) : null;
        const syncsBefore = syncsSoFar(sys);
        const r = await runLoad(sys, kind);
        // warm-up calls are in these means too: the same kind, the same server
        if (before) {
          const after = await stepTotals(sys);
          r.steps_ms = stepMeans(before, after);
          const settled = (after.settle?.count ?? 0) - (before.settle?.count ?? 0);
          if (sys.traceFile) r.syncs_per_charged_call = settled > 0 ? (syncsSoFar(sys) - syncsBefore) / settled : null;
        }
        runs.push({ round, system: sys.name, load1: loadavg()[0], ...r });
        const syncs = r.syncs_per_charged_call !== undefined ? `, ${r.syncs_per_charged_call?.toFixed(2)} syncs a charged call` : '';
        console.error(`round ${round + 1}/${ROUNDS} ${kind} ${sys.name}: ${r.captures_per_s} captures/s, ${(r.share_503 * 100).toFixed(0)} % 503, p50 ${r.p50_ms} ms, ${r.cpu_ms_per_capture?.toFixed(2) ?? '–'} ms CPU a capture${syncs}`);
      }
    }
  }
  const names = [...systems.map((s) => s.name), ...skipped.map((s) => s.name)];
  const table = KINDS.map((kind) => {
    const row = { kind };
    for (const name of names) {
      const mine = runs.filter((r) => r.system === name && r.kind === kind);
      row[name] = mine.length
        ? {
          captures_per_s: median(mine.map((r) => r.captures_per_s)), share_503: median(mine.map((r) => r.share_503)), p50_ms: median(mine.map((r) => r.p50_ms)), p99_ms: median(mine.map((r) => r.p99_ms)), runs: mine.map((r) => r.captures_per_s),
          cpu_ms_per_capture: median(mine.map((r) => r.cpu_ms_per_capture).filter((v) => typeof v === 'number')),
          ...(FLUSHES && name.startsWith('service') ? { syncs_per_charged_call: median(mine.map((r) => r.syncs_per_charged_call).filter((v) => typeof v === 'number')) } : {}),
        }
        : null;
    }
    const peersRun = names.filter((n) => !n.startsWith('service') && row[n]);
    const best = peersRun.length ? Math.max(...peersRun.map((n) => row[n].captures_per_s)) : NaN;
    const mine = runs.filter((r) => r.system === 'service' && r.kind === kind && r.steps_ms);
    if (mine.length) row.service_steps_ms = Object.fromEntries(STEPS.map((st) => [st, median(mine.map((r) => r.steps_ms[st]).filter((v) => v !== null))]));
    row.best_peer = best;
    row.ratio = row.service ? row.service.captures_per_s / best : NaN;
    return row;
  });

  const when = new Date().toISOString();
  const result = { when, node: process.version, rounds: ROUNDS, seconds: SECONDS, warmup: WARMUP, concurrency: CONCURRENCY, workers: WORKERS, skipped, table, runs };
  const f = (n, d = 1) => (n === null || n === undefined || Number.isNaN(n) ? '–' : n.toFixed(d));
  const cell = (c) => (c ? `${f(c.captures_per_s)}${c.share_503 > 0 ? ` (${f(c.share_503 * 100, 0)} % 503)` : ''}` : 'not run');
  const md = [
    `# Side-by-side: service vs peers (${when})`,
    '',
    `Command: \`npm run build && ${process.env.PEERS_DIR ? `PEERS_DIR=${process.env.PEERS_DIR} ` : ""}${process.env.KINDS ? `KINDS='${process.env.KINDS}' ` : ''}node bench/side-by-side.mjs${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(' ')}` : ''}\`. ` +
      (SET === 'tiny128' ? 'Graph ../shared/peers/model/tiny128.onnx (the service deploys it by manifest), ' : `Model set ${SET} (service only), `) +
      'client ../shared/peers/load.mjs, ' +
      `WORKERS=${WORKERS} / PEER_WORKERS=${WORKERS}, concurrency ${CONCURRENCY}, ${ROUNDS} interleaved round(s) of ${SECONDS} s (+${WARMUP} s warm-up); ` +
      'medians of captures/s counted on 200 answers only; the share of 503 answers in brackets.',
    '',
    `| kind | ${names.join(' | ')} | service / best peer |${BASELINE ? ' service / service-before |' : ''}`,
    `|---|${names.map(() => '---|').join('')}---|${BASELINE ? '---|' : ''}`,
    ...table.map((r) => `| ${r.kind} | ${names.map((n) => cell(r[n])).join(' | ')} | ${f(r.ratio, 2)} |${BASELINE ? ` ${f(r.service && r['service-before'] ? r.service.captures_per_s / r['service-before'].captures_per_s : NaN, 2)} |` : ''}`),
    '',
    ...skipped.map((s) => `- ${s.name} not run: ${s.skipped}`),
    ...(BASELINE ? [`- service-before: the same service built from ${BASELINE} (the code before this change), run in the same interleaved rounds.`] : []),
    '',
    ...latencyTable(table, names),
    ...cpuTable(table, names),
    ...syncTable(table, names),
    `Host: ${availableParallelism()} cores; 1-min load average during the rounds: median ${f(median(runs.map((r) => r.load1)))}, ` +
      `max ${f(Math.max(...runs.map((r) => r.load1)))} (above the core count, other work shared the machine: compare within this run only).`,
    '',
    ...stepTable(table),
    ...bareRatios(table),
    `![captures/s per kind](${OUT}.svg)`,
    '',
  ];
  writeFileSync(join(here, `results/${OUT}.json`), `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(join(here, `results/${OUT}.md`), md.join('\n'));
  writeFileSync(join(here, `results/${OUT}.svg`), svg(table, names, when));
  console.log(md.join('\n'));
} finally {
  for (const s of systems) await stop(s.proc);
  for (const s of systems) s.cleanup?.();
}

/** fdatasync calls per charged call of each traced service build (--flushes). */
function syncTable(table, names) {
  if (!FLUSHES) return [];
  const traced = names.filter((n) => n.startsWith('service'));
  const f = (v) => (typeof v === 'number' && !Number.isNaN(v) ? v.toFixed(2) : '–');
  return [
    `Disk syncs (fdatasync) per charged call at concurrency ${CONCURRENCY} (medians over rounds; each service under strace, so its captures/s above is slowed a little):`,
    '',
    `| kind | ${traced.join(' | ')} |`,
    `|---|${traced.map(() => '---|').join('')}`,
    ...table.map((r) => `| ${r.kind} | ${traced.map((n) => f(r[n]?.syncs_per_charged_call)).join(' | ')} |`),
    '',
  ];
}

/** CPU per capture of every system (user + system time of its processes and threads in the
 * measured window, over the captures answered 200): what each capture costs the host, which a
 * busy shared machine disturbs less than captures/s. */
function cpuTable(table, names) {
  const f = (v) => (typeof v === 'number' && !Number.isNaN(v) ? v.toFixed(2) : '–');
  return [
    `CPU per capture, ms (user + system of each system's processes, medians over rounds):`,
    '',
    `| kind | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    ...table.map((r) => `| ${r.kind} | ${names.map((n) => f(r[n]?.cpu_ms_per_capture)).join(' | ')} |`),
    '',
  ];
}

/** p50 / p99 latency (ms, medians over rounds) of every system, per kind. */
function latencyTable(table, names) {
  const f = (v) => (v === null || v === undefined || Number.isNaN(v) ? '–' : v.toFixed(1));
  return [
    `Latency at concurrency ${CONCURRENCY}, p50 / p99 ms (medians over rounds):`,
    '',
    `| kind | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    ...table.map((r) => `| ${r.kind} | ${names.map((n) => (r[n] ? `${f(r[n].p50_ms)} / ${f(r[n].p99_ms)}` : 'not run')).join(' | ')} |`),
    '',
  ];
}

/** Where a service call's time goes: mean ms per call in each step of the use case
 * (lv_verify_step_seconds), medians over rounds. `receive` is the upload as the client sends
 * it; reserve and settle are durable store commits; infer includes the hops to the pool. */
function stepTable(table) {
  const rows = table.filter((r) => r.service_steps_ms);
  if (!rows.length) return [];
  const f = (v) => (v === null || v === undefined || Number.isNaN(v) ? '–' : v.toFixed(2));
  return [
    'Where a service call\'s time goes (mean ms per call in each step, `lv_verify_step_seconds`, medians over rounds; warm-up calls included):',
    '',
    `| kind | ${STEPS.join(' | ')} | sum |`,
    `|---|${STEPS.map(() => '---|').join('')}---|`,
    ...rows.map((r) => `| ${r.kind} | ${STEPS.map((st) => f(r.service_steps_ms[st])).join(' | ')} | ${f(STEPS.reduce((a, st) => a + (r.service_steps_ms[st] ?? 0), 0))} |`),
    '',
  ];
}

/** Service over bare engine (bench/results/engine-<set>.json from bench/engine.mjs, if
 * there): the same rgb8/png work without HTTP, validation, metering or signing. */
function bareRatios(table) {
  const file = join(here, `results/engine-${SET}.json`);
  if (!existsSync(file)) return [];
  const bare = JSON.parse(readFileSync(file, 'utf8')).medians;
  const caseFor = { 'single-png': 'single', 'single-rgb8': 'single', sequence20: 'sequence20', batch32: 'batch32' };
  const rows = table.filter((r) => r.service && bare[caseFor[r.kind]]).map((r) => {
    const b = bare[caseFor[r.kind]]['this build'];
    return `| ${r.kind} | ${r.service.captures_per_s.toFixed(1)} | ${b.toFixed(1)} | ${(r.service.captures_per_s / b).toFixed(2)} |`;
  });
  return rows.length ? [`Service / bare engine (bench/results/engine-${SET}.json):`, '', '| kind | service | bare engine | ratio |', '|---|---|---|---|', ...rows, ''] : [];
}

/** Grouped bars: captures/s per kind, one bar per system; a system not run has none. */
function svg(table, names, when) {
  const colours = { service: '#1f77b4', 'service-before': '#9ecae1', fastify: '#ff7f0e', fastapi: '#2ca02c' };
  const W = 760;
  const H = 380;
  const left = 60;
  const bottom = 320;
  const top = 50;
  const max = Math.max(1, ...table.flatMap((r) => names.map((n) => r[n]?.captures_per_s ?? 0)));
  const scale = (bottom - top) / max;
  const group = (W - left - 20) / table.length;
  const bar = Math.min(50, (group - 30) / names.length);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">captures/s per kind (200 answers; WORKERS=${WORKERS}, concurrency ${CONCURRENCY}, medians)</text>`,
    `<text x="${W / 2}" y="36" text-anchor="middle" fill="#666">${when}</text>`,
    `<line x1="${left}" y1="${bottom}" x2="${W - 10}" y2="${bottom}" stroke="#000"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="#000"/>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    const y = bottom - v * scale;
    out.push(`<line x1="${left - 4}" y1="${y}" x2="${W - 10}" y2="${y}" stroke="#ddd"/><text x="${left - 6}" y="${y + 4}" text-anchor="end">${v.toFixed(0)}</text>`);
  }
  table.forEach((r, g) => {
    const x0 = left + g * group + (group - bar * names.length) / 2;
    names.forEach((n, k) => {
      const v = r[n]?.captures_per_s;
      const x = x0 + k * bar;
      if (v === undefined) {
        out.push(`<text x="${x + bar / 2}" y="${bottom - 4}" text-anchor="middle" font-size="9" fill="#999">n/a</text>`);
        return;
      }
      const h = v * scale;
      out.push(`<rect x="${x}" y="${bottom - h}" width="${bar - 2}" height="${h}" fill="${colours[n] ?? '#888'}"/>`);
      out.push(`<text x="${x + bar / 2 - 1}" y="${bottom - h - 3}" text-anchor="middle" font-size="10">${v.toFixed(0)}</text>`);
    });
    out.push(`<text x="${left + g * group + group / 2}" y="${bottom + 18}" text-anchor="middle">${r.kind}</text>`);
  });
  names.forEach((n, k) => {
    out.push(`<rect x="${left + k * 120}" y="${H - 26}" width="12" height="12" fill="${colours[n] ?? '#888'}"/><text x="${left + k * 120 + 16}" y="${H - 16}">${n}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
