// Starts the service over and over, a few at a time, and stops each one: the check that no start
// hangs and no stop aborts (issue 39). A start that prints no "listening" line within --hang-s is
// a hang: its threads' states and every thread's native stack (gdb, when installed) are written
// to --out before it is killed, since they are gone once it is. Each stop must end with exit 0
// and the "stopped" line; anything else (134 from an abort, a signal, a missing line) is counted
// and its output kept.
//
//   npm run build && node bench/start-loop.mjs [--starts 1000] [--concurrency 2] [--burn 1]
//       [--hang-s 60] [--backend native] [--workers 1] [--signal-at <log msg>] [--delay-ms 0]
//       [--kill] [--source] [--out /tmp/start-loop]
//
// --burn N runs N busy-looping processes (niced) beside the starts, so that threads are
// preempted at odd moments; --signal-at sends SIGTERM --delay-ms after the first log line whose
// "msg" contains the text instead of after "listening" (a stop during start-up); --source runs
// the sources through tsx instead of dist/; --kill sends SIGKILL instead of SIGTERM and counts
// only hangs (a quicker hunt for hangs early in start-up, with --signal-at naming the first log
// line). Prints one JSON summary line at the end.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { opt } from './cli-args.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const STARTS = Number(opt('starts', 1000));
const CONCURRENCY = Number(opt('concurrency', 2));
const BURN = Number(opt('burn', 1));
const HANG_S = Number(opt('hang-s', 60));
const BACKEND = opt('backend', 'native');
const WORKERS = opt('workers', '1');
const SIGNAL_AT = opt('signal-at', null);
const DELAY_MS = Number(opt('delay-ms', 0));
const OUT = opt('out', join(tmpdir(), 'start-loop'));
const KILL = process.argv.includes('--kill');
const args = process.argv.includes('--source') ? ['--import', 'tsx', 'src/main.ts'] : ['dist/src/main.js'];
mkdirSync(OUT, { recursive: true });

const burners = Array.from({ length: BURN }, () =>
  spawn('nice', ['-n', '10', process.execPath, '-e', 'for(;;){}'], { stdio: 'ignore' }));
const endBurners = () => { for (const b of burners) b.kill('SIGKILL'); };
process.on('exit', endBurners);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

/** What is kept of a hung start: /proc's view of each thread, then gdb's native stacks. */
function capture(pid, file) {
  const states = spawnSync('sh', ['-c', `for t in /proc/${pid}/task/*; do echo "$(basename $t) $(cat $t/comm) $(cut -d' ' -f3 $t/stat) $(cat $t/wchan)"; done`], { encoding: 'utf8' }).stdout;
  const gdb = spawnSync('gdb', ['-p', String(pid), '-batch', '-ex', 'thread apply all bt'], { encoding: 'utf8', timeout: 120_000 });
  writeFileSync(file, `threads:\n${states}\n\ngdb:\n${gdb.stdout ?? ''}\n${gdb.stderr ?? ''}\n${gdb.error ? String(gdb.error) : ''}`);
}

const counts = { started: 0, clean: 0, hangs: 0, bad_exit: 0 };
const codes = {};
const startMs = [];

async function once(i) {
  const dir = mkdtempSync(join(tmpdir(), 'lv-loop-'));
  const env = { ...process.env, HOST: '127.0.0.1', PORT: '0', DATA_DIR: dir, WORKERS, INFERENCE_THREADS: '1', WARMUP_RUNS: '2', INFERENCE_BACKEND: BACKEND, LOG_LEVEL: 'info' };
  const t0 = performance.now();
  const p = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let buf = '';
  let signalled = false;
  let listening = false;
  const exit = new Promise((r) => p.on('exit', (code, signal) => r({ code, signal })));
  const hang = setTimeout(() => {
    if (listening) return;
    counts.hangs++;
    const file = join(OUT, `hang-${i}-${p.pid}.txt`);
    capture(p.pid, file);
    writeFileSync(`${file}.log`, out + err);
    console.log(`start ${i} (pid ${p.pid}) printed no "listening" in ${HANG_S} s: ${file}`);
    p.kill('SIGKILL');
  }, HANG_S * 1000);
  const signal = () => {
    if (signalled) return;
    signalled = true;
    setTimeout(() => p.kill(KILL ? 'SIGKILL' : 'SIGTERM'), DELAY_MS);
  };
  p.stderr.on('data', (d) => (err += d));
  p.stdout.on('data', (d) => {
    out += d;
    buf += d;
    let n;
    while ((n = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, n);
      buf = buf.slice(n + 1);
      let msg = '';
      try {
        msg = JSON.parse(line).msg ?? '';
      } catch {
        continue;
      }
      if (msg === 'listening') {
        listening = true;
        startMs.push(performance.now() - t0);
        if (!SIGNAL_AT) signal();
      }
      if (SIGNAL_AT && msg.includes(SIGNAL_AT)) signal();
    }
  });
  const { code, signal: sig } = await exit;
  clearTimeout(hang);
  counts.started++;
  const key = sig ? `signal ${sig}` : `exit ${code}`;
  codes[key] = (codes[key] ?? 0) + 1;
  const stopped = /"msg":"stopped"/.test(out);
  if ((code === 0 && stopped) || (KILL && sig === 'SIGKILL' && signalled)) counts.clean++;
  else if (listening || signalled) {
    counts.bad_exit++;
    const file = join(OUT, `bad-${i}-${p.pid}.log`);
    writeFileSync(file, `${key}\n${out}\n--- stderr ---\n${err}`);
    console.log(`start ${i} (pid ${p.pid}) ended with ${key}${stopped ? '' : ' and no "stopped" line'}: ${file}`);
  }
  rmSync(dir, { recursive: true, force: true });
}

let next = 0;
const t0 = Date.now();
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (next < STARTS) {
    const i = next++;
    await once(i);
    if ((i + 1) % 50 === 0) console.log(`${i + 1}/${STARTS} ${JSON.stringify(counts)} ${Math.round((Date.now() - t0) / 1000)} s`);
  }
}));
endBurners();
const sorted = [...startMs].sort((a, b) => a - b);
console.log(JSON.stringify({ ...counts, exits: codes, starts: STARTS, concurrency: CONCURRENCY, burn: BURN, backend: BACKEND, signal_at: SIGNAL_AT, delay_ms: DELAY_MS, from: args.join(' '), median_listen_ms: Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0), seconds: Math.round((Date.now() - t0) / 1000) }));
