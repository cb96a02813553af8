// Where the service's CPU goes per capture, measured as CPU (Linux perf) rather than as V8's
// sampled wall time: the compiled service on tiny128 (deployed as bench/side-by-side.mjs
// deploys it) started with `--perf-basic-prof` (JIT frames named, with their tier: `*` TurboFan,
// `^` Sparkplug), one kind of the peers' load (load.mjs) for a warm-up and a measured window,
// `perf record -F 499 -g` on the whole process over that window, and each thread's CPU and
// voluntary context switches read from /proc at the window's bounds.
//
//   npm run build && PEERS_DIR=/tmp/peers-perf node bench/perf-profile.mjs --kind single-png \
//     [--workers 16] [--concurrency 32] [--seconds 12] [--warmup 50] [--from DIR] [--top 25] \
//     [--skip 0] [--port 18385] [--out NAME]
//
// Why beside bench/cpu-profile.mjs: V8's profiler samples a thread that is runnable but waiting
// for a core as running, and one blocked in a native call as that call's JavaScript caller, so
// on 2 cores with 20 threads its figures are mostly waiting; and it sees no thread without an
// isolate: V8's helper threads, where TurboFan compiles and concurrent marking run, are missing
// from it. perf samples only what runs on a CPU, kernel included. Samples are scaled so that
// all of them together are the process's CPU per capture (/proc, user + system, every thread).
//
// Thread kinds: by the bundle that a thread's JavaScript frames come from (main, api,
// inference, lmdb-writer); a thread without JavaScript is V8's or libuv's helper, split by what
// it ran (TurboFan compiles, garbage collection, other).
//
// Needs `perf` (linux-tools) and perf_event_paranoid <= 2 (user-space samples of one's own
// processes; kernel frames where allowed). Writes bench/results/NAME.md and NAME.json
// (NAME: perf-profile-<kind>-w<workers>-c<concurrency>).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { deployTiny128, exitIfPortServed, opt, peersFolder, requireBuildsAndPeers, ROOT, spawnService, statCpuSeconds, waitReady } from './tiny128-service.mjs';

const peers = peersFolder();
const KIND = opt('kind', 'single-png');
const WORKERS = Number(opt('workers', 16));
const CONCURRENCY = Number(opt('concurrency', 32));
const SECONDS = Number(opt('seconds', 12));
const WARMUP = Number(opt('warmup', 50));
/** seconds of the window before perf starts (load.mjs allows at most 60 s of warm-up) */
const SKIP = Number(opt('skip', 0));
const TOP = Number(opt('top', 25));
const FROM = opt('from', ROOT);
const PORT = Number(opt('port', 18385));
const OUT = opt('out', `perf-profile-${KIND}-w${WORKERS}-c${CONCURRENCY}`);

requireBuildsAndPeers([FROM], peers);
if (spawnSync('perf', ['--version']).status !== 0) {
  console.error('no `perf` on PATH');
  process.exit(2);
}

/** per thread: [voluntary context switches, non-voluntary ones, CPU seconds] */
function threads(pid) {
  const out = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      out[tid] = [
        Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
        Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
        statCpuSeconds(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')),
      ];
    } catch {
      // a thread that ended meanwhile
    }
  }
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'perf-profile-'));
const perfData = join(dir, 'perf.data');
let service = null;
process.on('exit', () => {
  if (service && service.exitCode === null) service.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const { env, token } = deployTiny128(dir, peers, FROM);
const base = `http://127.0.0.1:${PORT}`;
await exitIfPortServed(base, PORT);
const started = spawnService({ from: FROM, env, port: PORT, workers: WORKERS, nodeArgs: ['--perf-basic-prof'] });
service = started.proc;
await waitReady(base, service, started.log);

// The load: warm-up, then the window, which starts WARMUP s after load.mjs's first stderr line
// (its start) and lasts SECONDS; perf records from SKIP s into it for SECONDS - SKIP - 1 s, and
// the threads' CPU and switches are read at those bounds. Captures in the recording: the
// window's rate times the recording's length (the load is steady by then).
const load = spawn(process.execPath, [join(peers, 'load.mjs'), '--base', base, '--token', token, '--module', 'rgb_liveness',
  '--kind', KIND, '--concurrency', String(CONCURRENCY), '--seconds', String(SECONDS), '--warmup', String(WARMUP)], { stdio: ['ignore', 'pipe', 'pipe'] });
let stdout = '';
let win = null;
let perf = null;
let timer;
load.stdout.on('data', (c) => (stdout += c));
load.stderr.once('data', () => {
  timer = setTimeout(() => {
    win = { threads0: threads(service.pid), load0: loadavg()[0], t0: performance.now() };
    perf = spawn('perf', ['record', '-F', '499', '-g', '-q', '-o', perfData, '-p', String(service.pid), '--', 'sleep', String(SECONDS - SKIP - 1)], { stdio: 'ignore' });
    perf.on('exit', () => {
      win.threads1 = threads(service.pid);
      win.t1 = performance.now();
    });
  }, (WARMUP + SKIP) * 1000);
});
const code = await new Promise((r) => load.on('close', r));
clearTimeout(timer);
if (code !== 0 || !win) throw new Error(`load.mjs failed (${code})`);
win.load1 = loadavg()[0];
if (!win.threads1) await new Promise((r) => perf.on('exit', r));
const line = JSON.parse(stdout.trim().split('\n').pop());
const captures = (line.captures_per_s * (win.t1 - win.t0)) / 1000;
// perf resolves JIT frames from /tmp/perf-<pid>.map, which the service writes: read before it goes
const script = spawnSync('perf', ['script', '-i', perfData, '-F', 'tid,ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 }).stdout;
const gone = new Promise((r) => service.once('exit', r));
service.kill('SIGTERM');
const kill = setTimeout(() => service.kill('SIGKILL'), 60_000);
await gone;
clearTimeout(kill);
rmSync(`/tmp/perf-${service.pid}.map`, { force: true });
// --perf-basic-prof also has V8 write a log per isolate into the service's working directory
for (const f of readdirSync(FROM)) if (f.startsWith('isolate-') && f.endsWith(`-${service.pid}-v8.log`)) rmSync(join(FROM, f), { force: true });

// ---------------------------------------------------------------- the samples

/** [{ tid, stack: [leaf, ..., root] }] */
const samples = [];
let cur = null;
for (const l of script.split('\n')) {
  if (l.trim() === '') {
    if (cur) samples.push(cur);
    cur = null;
  } else if (!l.startsWith('\t')) {
    cur = { tid: l.trim().split(/\s+/)[0], stack: [] };
  } else if (cur) {
    const m = /^\s*[0-9a-f]+\s+(.*)$/.exec(l);
    cur.stack.push(m ? m[1] : l.trim());
  }
}
if (cur) samples.push(cur);
if (samples.length === 0) throw new Error('perf recorded no samples (perf_event_paranoid?)');

const BUNDLES = [['api', 'worker.bundle'], ['inference', 'inference.bundle'], ['lmdb-writer', 'lmdb-writer.bundle'], ['main', 'main.bundle']];
const votes = new Map();
for (const s of samples) {
  for (const f of s.stack) {
    const b = BUNDLES.find(([, m]) => f.includes(m));
    if (!b) continue;
    const v = votes.get(s.tid) ?? new Map();
    votes.set(s.tid, v);
    v.set(b[0], (v.get(b[0]) ?? 0) + 1);
  }
}
const kindOfTid = (tid) => {
  const v = votes.get(tid);
  return v ? [...v.entries()].sort((a, b) => b[1] - a[1])[0][0] : null;
};
/** a helper thread's sample by what it ran */
function helperJob(stack) {
  if (stack.some((f) => f.includes('OptimizedCompilationJob') || f.includes('compiler::'))) return 'helpers: TurboFan compiles';
  if (stack.some((f) => /Marking|Sweeper|Scaveng|Evacuat|ArrayBufferSweeper|Unmapper|PointersUpdating/.test(f))) return 'helpers: garbage collection';
  return 'helpers: other';
}
const norm = (f) => f.replace(/ file:\/\/\S*\//, ' ').replace(/\(anonymous namespace\)::/g, '').slice(0, 110);
const MM = /^(__munmap|__mmap|mmap64|munmap|exc_page_fault|asm_exc_page_fault|madvise|__madvise)$/;

const N = samples.length;
const cpu0 = Object.values(win.threads0).reduce((a, t) => a + t[2], 0);
const cpu1 = Object.values(win.threads1).reduce((a, t) => a + t[2], 0);
const cpuMs = ((cpu1 - cpu0) * 1000) / captures;
const ms = (count) => (count / N) * cpuMs;

const kinds = new Map(); // kind -> { samples, self: Map, nearestJs: Map, mm }
for (const s of samples) {
  const kind = kindOfTid(s.tid) ?? helperJob(s.stack);
  const k = kinds.get(kind) ?? { samples: 0, self: new Map(), nearestJs: new Map(), mm: 0 };
  kinds.set(kind, k);
  k.samples++;
  const leaf = norm(s.stack[0] ?? '?');
  k.self.set(leaf, (k.self.get(leaf) ?? 0) + 1);
  const js = s.stack.find((f) => f.startsWith('JS:'));
  const nj = js ? norm(js) : '(no JavaScript frame)';
  k.nearestJs.set(nj, (k.nearestJs.get(nj) ?? 0) + 1);
  if (s.stack.some((f) => MM.test(f))) k.mm++;
}

// voluntary context switches per capture, by thread kind (threads without samples: 'idle')
const switches = new Map();
for (const [tid, t1] of Object.entries(win.threads1)) {
  const t0 = win.threads0[tid];
  if (!t0) continue;
  const kind = kindOfTid(tid) ?? 'helpers (all)';
  const v = switches.get(kind) ?? { threads: 0, voluntary: 0, involuntary: 0 };
  switches.set(kind, v);
  v.threads++;
  v.voluntary += (t1[0] - t0[0]) / captures;
  v.involuntary += (t1[1] - t0[1]) / captures;
}

const round = (x) => Math.round(x * 1000) / 1000;
const top = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([name, c]) => ({ name, ms: round(ms(c)) }));
const order = [...kinds.entries()].sort((a, b) => b[1].samples - a[1].samples);
const result = {
  when: new Date().toISOString(), kind: KIND, workers: WORKERS, concurrency: CONCURRENCY, seconds: SECONDS, warmup: WARMUP, skip: SKIP, build: FROM,
  captures_per_s: line.captures_per_s, non200: line.non200_by_status ?? {}, load1: [win.load0, win.load1],
  cpu_ms_per_capture: round(cpuMs), samples: N,
  kinds: Object.fromEntries(order.map(([kind, k]) => [kind, { ms: round(ms(k.samples)), mm_ms: round(ms(k.mm)), self: top(k.self), nearest_js: top(k.nearestJs) }])),
  switches_per_capture: Object.fromEntries([...switches.entries()].map(([kind, v]) => [kind, { threads: v.threads, voluntary: round(v.voluntary), involuntary: round(v.involuntary) }])),
};

const cmd = `PEERS_DIR=${process.env.PEERS_DIR ?? '../shared/peers'} node bench/perf-profile.mjs ${process.argv.slice(2).join(' ')}`;
const md = [
  `# perf profile: ${KIND}, WORKERS=${WORKERS}, concurrency ${CONCURRENCY} (${result.when})`,
  '',
  `Command: \`${cmd}\` (build: ${FROM}). ${line.captures_per_s} captures/s answered 200 over ${SECONDS} s after ${WARMUP} s of the same load (recorded from ${SKIP} s into it for ${((win.t1 - win.t0) / 1000).toFixed(1)} s) ` +
    `(non-200: ${JSON.stringify(result.non200)}); process CPU (/proc, every thread): **${result.cpu_ms_per_capture} ms per capture**; ` +
    `${N} perf samples at 499 Hz, scaled to that figure. 1-min load average ${win.load0.toFixed(1)} -> ${win.load1.toFixed(1)}.`,
  '',
  '| thread kind | ms of CPU per capture | of it in mmap / munmap / page faults | voluntary switches per capture |',
  '|---|---|---|---|',
  ...order.map(([kind, k]) => `| ${kind} | ${round(ms(k.samples))} | ${round(ms(k.mm))} | ${switches.get(kind)?.voluntary.toFixed(2) ?? ''} |`),
  ...(switches.has('helpers (all)') ? [`| helpers (all), switches | | | ${switches.get('helpers (all)').voluntary.toFixed(2)} |`] : []),
  '',
];
for (const [kind, k] of order) {
  md.push(`## ${kind}: ms per capture`, '', '| self (leaf frame) | ms | nearest JavaScript frame | ms |', '|---|---|---|---|');
  const a = top(k.self);
  const b = top(k.nearestJs);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    md.push(`| ${a[i] ? `\`${a[i].name.replace(/\|/g, '\\|')}\`` : ''} | ${a[i]?.ms ?? ''} | ${b[i] ? `\`${b[i].name.replace(/\|/g, '\\|')}\`` : ''} | ${b[i]?.ms ?? ''} |`);
  }
  md.push('');
}
mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
writeFileSync(join(ROOT, 'bench/results', `${OUT}.md`), md.join('\n'));
writeFileSync(join(ROOT, 'bench/results', `${OUT}.json`), `${JSON.stringify(result, null, 2)}\n`);
console.log(md.slice(0, 14).join('\n'));
console.log(`written: bench/results/${OUT}.md, .json`);
