// What the profiling scripts (cpu-profile.mjs, perf-profile.mjs, warmup-curve.mjs,
// png-stages-cpu.mjs) share: their command-line options, the peers' folder and the checks that
// a build and the peers are there; the compiled service deployed as bench/side-by-side.mjs
// deploys it (tiny128 by manifest, resized bilinearly as the peers resize), started and
// awaited; and CPU seconds read from /proc. Plain JavaScript, as those scripts are: the service
// is measured as it runs, with no loader.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRODUCTION_ENV } from './production-env.mjs';

/** this repository's root (the default build to measure) */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The value after `--name` on the command line, or `dflt`. */
export function opt(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
}

/** The peers' folder (PEERS_DIR, else ../shared/peers), as its real path: load.mjs runs its
 * command line only when argv[1] is its own resolved path (../shared is a link). */
export function peersFolder() {
  const dir = process.env.PEERS_DIR ?? join(ROOT, '../shared/peers');
  return existsSync(dir) ? realpathSync(dir) : dir;
}

/** Exits 2, saying why, unless every folder of `builds` holds a compiled build (`file` in it)
 * and `peers` holds load.mjs. */
export function requireBuildsAndPeers(builds, peers, file = 'dist/src/main.js') {
  for (const dir of builds) {
    if (!existsSync(join(dir, file))) {
      console.error(`no compiled build in ${dir}: \`npm run build\` there first`);
      process.exit(2);
    }
  }
  if (!existsSync(join(peers, 'load.mjs'))) {
    console.error(`no peers at ${peers} (PEERS_DIR)`);
    process.exit(2);
  }
}

export const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** user + system seconds in a /proc/<pid>/stat (or task stat) text: the fields after the
 * command name, which may itself hold spaces and parentheses */
export function statCpuSeconds(stat) {
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** user + system seconds of the whole process `pid` (every thread) */
export function processCpuSeconds(pid) {
  return statCpuSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

/** CPU seconds used so far by `pid` and every process below it: the service is one process
 * (its threads included), a peer may run several (uvicorn's workers). Null without /proc. */
export function treeCpuSeconds(pid) {
  if (!existsSync('/proc/self/stat')) return null;
  const children = new Map();
  const cpu = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    cpu.set(Number(entry), statCpuSeconds(stat));
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(Number(entry));
  }
  let total = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    total += cpu.get(p) ?? 0;
    stack.push(...(children.get(p) ?? []));
  }
  return total;
}

/** Deploys tiny128 from the peers' folder into `dir`, disables color_liveness and mints an
 * unlimited token with the build in `from`: the service's environment and that token. */
export function deployTiny128(dir, peers, from) {
  const models = join(dir, 'models', 'tiny128');
  mkdirSync(models, { recursive: true });
  copyFileSync(join(peers, 'model/tiny128.onnx'), join(models, 'tiny128.onnx'));
  const manifest = JSON.parse(readFileSync(join(peers, 'model/tiny128.manifest.json'), 'utf8'));
  for (const g of manifest.modules.rgb_liveness.graphs) g.resize = 'bilinear';
  writeFileSync(join(models, 'manifest.json'), JSON.stringify(manifest, null, 2));
  const env = { ...process.env, ...PRODUCTION_ENV, DATA_DIR: join(dir, 'data'), MODELS_DIR: join(dir, 'models'), MODEL_SET: 'tiny128', LOG_LEVEL: 'warn' };
  const cli = (...a) => {
    const r = spawnSync(process.execPath, [join(from, 'dist/src/cli/main.js'), ...a], { cwd: from, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`cli ${a.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  cli('module', 'disable', 'color_liveness');
  const token = JSON.parse(cli('token', 'create', '--name', 'bench', '--grant', 'rgb_liveness:unlimited:never')).token;
  return { env, token };
}

/** A child process with its output kept (for the error when it dies before it is ready). */
export function startLogged(cmd, args, opts) {
  const log = [];
  const proc = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.on('data', (d) => log.push(String(d)));
  proc.stderr.on('data', (d) => log.push(String(d)));
  return { proc, log };
}

/** Resolves once `base` answers /health/ready 200; throws if `proc` exits first or 240 s pass. */
export async function waitReady(base, proc, log) {
  for (const until = Date.now() + 240_000; ;) {
    if (proc.exitCode !== null) throw new Error(`exited (${proc.exitCode}) before it was ready:\n${log.join('').slice(-2000)}`);
    if (Date.now() > until) throw new Error('not ready within 240 s');
    if (await fetch(`${base}/health/ready`).then((r) => r.status === 200, () => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Exits 2 when something already answers on `base`: uWS listens with SO_REUSEPORT, so a second
 * service on a port already served would share its connections without an error (and the load
 * would meet the other one's tokens). */
export async function exitIfPortServed(base, port) {
  if (await fetch(`${base}/health/live`).then(() => true, () => false)) {
    console.error(`something already answers on port ${port}: pass --port`);
    process.exit(2);
  }
}

/** Starts the compiled service of `from` on 127.0.0.1:`port` with `workers` API workers (node
 * started with `nodeArgs`); the caller keeps `proc` (to kill it on exit) and awaits waitReady. */
export function spawnService({ from, env, port, workers, nodeArgs = [] }) {
  const { proc, log } = startLogged(process.execPath, [...nodeArgs, join(from, 'dist/src/main.js')], {
    cwd: from, env: { ...env, HOST: '127.0.0.1', PORT: String(port), WORKERS: String(workers) },
  });
  return { base: `http://127.0.0.1:${port}`, proc, log };
}
