import { execFileSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import t, { type Test } from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { postVerify, request, single } from '../helpers/captures.ts';
import { BUNDLES } from '../../scripts/build-stamp.mjs';
import { onLines, ROOT, spawnChild, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Drives `npm start` exactly as an operator or a supervisor does, and signals the pid it
// started (npm's), never node's directly.

interface Started {
  npm: ChildProcess;
  nodePid: number;
  port: number;
  lines: () => any[];
  stderr: () => string;
  npmExit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  env: NodeJS.ProcessEnv;
}

/** `npm start` (or another npm script), resolved once the service printed the line `until`
 * (default: the one that says it listens). */
async function npmStart(extra: Record<string, string> = {}, { script = 'start', until = 'listening' } = {}): Promise<Started> {
  const env = { ...process.env, HOST: '127.0.0.1', PORT: '0', DATA_DIR: tempDir(), WORKERS: '1', INFERENCE_THREADS: '1', WARMUP_RUNS: '0', LOG_LEVEL: 'info', ...extra };
  // detached: npm leads its own process group, so nothing here signals node by accident
  const npm = spawnChild('npm', script === 'start' ? ['start', '--silent'] : ['run', script, '--silent'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const parsed: any[] = [];
  let err = '';
  npm.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const npmExit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => npm.on('exit', (code, signal) => r({ code, signal })));
  const listening = new Promise<any>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm ${script} did not print "${until}":\n${err}`)), 180_000);
    onLines(npm.stdout!, (line) => {
      try {
        const j = JSON.parse(line);
        parsed.push(j);
        if (j.msg === until) {
          clearTimeout(timer);
          resolve(j);
        }
      } catch {
        /* build output */
      }
    });
    void npmExit.then(() => reject(new Error(`npm exited before "${until}":\n${err}`)));
  });
  const l = await listening;
  return { npm, nodePid: l.pid, port: l.port, lines: () => parsed, stderr: () => err, npmExit, env };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls until the pid is gone, bounded. */
async function gone(pid: number, ms = 60_000): Promise<boolean> {
  return waitFor(() => !alive(pid), { timeoutMs: ms, intervalMs: 100, what: `pid ${pid} to exit` }).catch(() => false);
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// Compiled, each thread runs as one bundled module (scripts/bundle.mjs), files the tests
// under tsx never load: this drives them through the paths that find files at run time (the
// console's folder, the pool's thread entries, the native packages), the CLI's bundle and a
// verify call end to end. Run on the service the SIGINT test then stops; answers the token the
// bundled CLI made (5 units a day: the drain's call below uses it too, a CLI process fewer).
async function compiledStartServes(t: Test, s: Started): Promise<string> {
  for (const { bundle } of BUNDLES) t.ok(existsSync(join(ROOT, 'dist/src', bundle)), `the build wrote ${bundle}`);
  const base = `http://127.0.0.1:${s.port}`;
  const page = await fetch(`${base}/admin`);
  t.equal(page.status, 200, 'the console page is served');
  t.match(await page.text(), /<html/i);
  const created = spawnChild(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'token', 'create', '--name', 'bundle', '--grant', 'rgb_liveness:5:day'], { cwd: ROOT, env: s.env });
  let out = '';
  created.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => created.on('exit', r));
  const token = JSON.parse(out).token as string;
  await waitFor(async () => (await fetch(`${base}/health/ready`)).status === 200, { what: 'models ready', timeoutMs: 120_000 });
  const r = await postVerify(base, token, 'rgb_liveness', request([single()]));
  t.equal(r.status, 200, r.text);
  t.equal(r.json.charged_units, 1);
  t.match(await (await fetch(`${base}/metrics`)).text(), /lv_verdicts_total\{[^}]*module="rgb_liveness"/, 'the verdict is in the metrics');
  // INFERENCE_BACKEND is auto here: the probe's thread (its own bundle) timed both CPU backends
  const chosen = s.lines().find((l) => Array.isArray(l.figures));
  t.ok(chosen, 'auto logged its measurement');
  for (const provider of ['native', 'wasm']) {
    const figure = chosen?.figures.find((f: { provider: string }) => f.provider === provider);
    t.ok(figure && typeof figure.ms_per_call === 'number', `the probe measured ${provider}: ${JSON.stringify(figure)}`);
  }
  return token;
}

// Each test starts its own service (own DATA_DIR, port, process group) and waits on it (start,
// model load, drain): two at a time. `npm start` rebuilds dist/ first when a source changed,
// and two rebuilds at once would write the same files: the build is brought up to date here,
// once, so each start finds it current (as after `npm ci`).
execFileSync(process.execPath, ['scripts/build-stamp.mjs', 'start'], { cwd: ROOT, stdio: 'pipe' });
t.jobs = 2;

// SIGINT is Ctrl-C in a terminal: the shell sends SIGINT to the process group, and npm forwards
// one more; the second must not cut the drain short (issue 25). The run holds a call in flight
// (3 s of test delay on a capture named slow-*) while both arrive: npm's forwarded one, then one
// to node itself. (That ran on a start of its own; issue 43: a start fewer.)
// One compiled start serves every check of a running service here (issue 43: this was two
// starts, SIGTERM and SIGINT): the ready line and its first-administrator hint, the bundled
// workers, then the Ctrl-C drain. What the SIGTERM start held besides went where it is held
// now: SIGTERM forwarded by npm to the service, 'SIGTERM to npm run dev' below (npm's
// forwarding is the same for both scripts, which exec node alike); SIGTERM draining a serving
// process and exiting 0, test/service/startup.test.ts (on the build, as here, when dist/ is
// current); the hint's absence once an administrator exists, test/service/announce.test.ts.
t.test('SIGINT to the pid npm start gave drains and stops the service, and a second SIGINT during the drain is not a kill: the call in flight is answered (and the compiled start runs the bundled API worker: console, verify and metrics answer)', async (t) => {
  const s = await npmStart({ TEST_INFERENCE_DELAY_MS: '3000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' });
  t.teardown(() => {
    if (alive(s.nodePid)) process.kill(s.nodePid, 'SIGKILL');
  });
  t.not(s.nodePid, s.npm.pid, 'node is a child of npm, not npm itself');
  t.equal((await fetch(`http://127.0.0.1:${s.port}/health/live`)).status, 200);
  const listening = s.lines().find((l) => l.msg === 'listening');
  t.match(listening, { url: `http://127.0.0.1:${s.port}`, console_url: `http://127.0.0.1:${s.port}/admin` }, 'the ready line says where');
  t.match(listening, { first_admin: /user create <name> --role admin/ }, 'and, with no administrator yet, how to get in');
  // the URL it prints answers where things are, the console it names among them (was
  // test/cli/first-steps.test.ts's, on a server of its own; issue 43)
  const root = await fetch(listening.url.replace('localhost', '127.0.0.1'));
  t.equal(root.status, 200, 'GET / at the URL the line prints: not a 404');
  const where = await root.json();
  t.match(where, { console: '/admin', openapi: '/openapi.json', health: '/health/ready' });
  t.equal(listening.console_url, `${listening.url}${where.console}`, 'the console it names is the one the line names');
  // the bundled API worker's checks share this start (one npm start fewer)
  const token = await compiledStartServes(t, s);

  const base = `http://127.0.0.1:${s.port}`;
  const reserved = async () => Number(/lv_verify_step_seconds_count\{[^}]*step="reserve"[^}]*\} (\d+)/.exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? 0);
  const before = await reserved();
  const call = postVerify(base, token, 'rgb_liveness', request([single({ id: 'slow-drain' })]));
  // the call is in inference (held 3 s by the test delay) once its reservation step is timed
  await waitFor(async () => (await reserved()) > before, { what: 'the call past its reservation' });
  process.kill(s.npm.pid!, 'SIGINT');
  await waitFor(() => s.lines().some((l) => l.msg === 'draining'), { what: 'the drain' });
  process.kill(s.nodePid, 'SIGINT');
  const r = await call;
  t.equal(r.status, 200, 'the call in flight was answered');

  await s.npmExit;
  t.ok(await gone(s.nodePid), 'the service process ended');
  t.equal(await connects(s.port), false, 'nobody serves the port any more');
  t.ok(s.lines().some((l) => l.msg === 'draining'), 'it drained');
  t.ok(s.lines().some((l) => /already stopping/.test(l.msg ?? '')), 'the second signal is acknowledged');
  t.ok(s.lines().some((l) => l.msg === 'stopped' && l.code === 0), 'and stopped cleanly');
  t.notMatch(s.stderr(), /Vulkan|libvulkan/, 'no native WebGPU probe noise on stderr');
});

// Issue 39: a stop while the inference pool creates and warms its sessions aborted the process
// (onnxruntime-node inside a call in a thread being terminated: exit 134). Both ways npm passes
// a stop on: its own SIGTERM forwarded, and npm killed outright (the service, orphaned, drains).
// Warm-up long enough that the stop lands inside it. (A stop at
// every step of a start, on the service itself, for each backend: start-signals.test.ts.)
// npm killed outright: the orphaned service notices its parent is gone and drains rather than
// staying orphaned (this ran on a start of its own, killed once listening; issue 43: a start
// fewer; a start is orphaned the same way whatever step it is in).
// The SIGTERM run is `npm run dev`, which runs the sources through tsx: its script execs node
// as `npm start` does, so the SIGTERM npm forwards reaches the service (not a shell that dies
// of it: npm exited 143). (That ran on a warm start of its own; issue 43: a start fewer.) It
// runs on the native backend: the SIGTERM that reaches node right after 'inference: starting
// pool' is also start-signals.test.ts's "native: while the pool creates its sessions" moment,
// which had a start of its own there (issue 43: a start fewer), and is held to the same checks
// (exit 0, the "stopped" line, no error logged). The npm start killed outright runs on wasm
// (it ran on auto, issue 43): auto's pool, once auto has chosen, is the native or the wasm pool,
// so with the dev run on native both runtimes' pools are stopped through npm here; and auto's
// measurement before it, which this start sat through before its signal (3 CPU-s here at
// WARMUP_RUNS=30, most of the start's CPU), is the measurement that start-signals.test.ts
// stops, and that the compiled start above runs to its end and checks.
for (const how of ['SIGTERM to npm run dev', 'npm start killed'] as const) {
  t.test(`${how} while the pool warms up: the service stops cleanly, no abort`, async (t) => {
    const dev = how === 'SIGTERM to npm run dev';
    const s = await npmStart({ WARMUP_RUNS: '30', INFERENCE_BACKEND: dev ? 'native' : 'wasm' }, { script: dev ? 'dev' : 'start', until: 'inference: starting pool' });
    t.teardown(() => {
      if (alive(s.nodePid)) process.kill(s.nodePid, 'SIGKILL');
    });
    process.kill(s.npm.pid!, dev ? 'SIGTERM' : 'SIGKILL');
    const npm = await s.npmExit;
    t.ok(await gone(s.nodePid), 'the service process ended');
    await waitFor(() => s.lines().some((l) => l.msg === 'stopped'), { what: 'the stopped line', timeoutMs: 60_000 }).catch(() => undefined);
    t.ok(s.lines().some((l) => l.msg === 'stopped' && l.code === 0), `it stopped cleanly: ${JSON.stringify(s.lines().slice(-3))}`);
    t.notMatch(s.stderr(), /terminate called|Napi::Error|Aborted/, 'no abort');
    t.equal(s.lines().find((l) => l.msg === 'inference: starting pool')?.provider, dev ? 'native' : 'wasm', `signalled while the ${dev ? 'native' : 'wasm'} pool starts`);
    if (dev) {
      t.equal(npm.code, 0, `npm run dev exits 0 with the service (got ${npm.code} ${npm.signal})`);
      t.notOk(s.lines().some((l) => l.msg === 'parent process is gone; draining'), 'through the signal, not as an orphan');
      t.notOk(s.lines().some((l) => l.level >= 50), `no error logged: ${JSON.stringify(s.lines().filter((l) => l.level >= 50))}`);
    } else {
      t.ok(s.lines().some((l) => l.msg === 'parent process is gone; draining'), 'the orphan noticed its parent was gone, and drained');
    }
  });
}
