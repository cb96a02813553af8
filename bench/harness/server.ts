import { spawn, spawnSync, type ChildProcess, type ChildProcessWithoutNullStreams, type SpawnOptions, type SpawnOptionsWithoutStdio, type SpawnSyncOptionsWithStringEncoding, type SpawnSyncReturns } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { FROM_BUILD, ROOT } from './from-build.ts';
import { waitFor } from './wait.ts';

export { ROOT };

// Every directory tempDir() made is removed when the process exits: a test's data directory
// (an LMDB store, keys, a model set) is ~1 MB, the suite makes a few hundred, and a developer
// who runs it daily would otherwise fill /tmp (3,243 were found left over). Removal at exit,
// not at a test's end, because a test's servers and files may outlive the subtest that made
// the directory. LV_KEEP_TEMP=1 keeps them for a post-mortem.
const made: string[] = [];

function removeTempDirs(): void {
  for (const dir of made.splice(0)) {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // a directory a test made unreadable (full-disk, permissions): left for the OS to clear
    }
  }
}

export function tempDir(prefix = 'lv-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  if (process.env.LV_KEEP_TEMP !== '1') {
    if (made.length === 0) process.once('exit', removeTempDirs);
    made.push(dir);
  }
  return dir;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

// Test servers and CLI runs start from the compiled build (what `npm start` and `npm run cli`
// run) when dist/ matches the sources, as `npm test` makes sure before tap starts
// (scripts/build-stamp.mjs): a server then starts in ~1 s and ~1.3 s of CPU instead of ~2.3 s
// and ~4.5 s, tsx compiling in each of its threads, and the suite starts about a hundred. When
// the sources changed since the build (a file run alone with `npx tap` after an edit), they run
// from the sources through tsx, so a test never runs stale code. LV_TEST_FROM_SOURCE=1 forces the
// sources. The rule lies in from-build.ts, which also starts this process's engine threads from
// the build.
const fromBuild = FROM_BUILD;
/** node's arguments that start the service */
export const SERVICE_ARGS: readonly string[] = fromBuild ? ['dist/src/main.js'] : ['--import', 'tsx', 'src/main.ts'];
/** node's arguments that run the operator CLI */
export const CLI_ARGS: readonly string[] = fromBuild ? ['dist/src/cli/main.js'] : ['--import', 'tsx', 'src/cli/bin.ts'];

// tap loads @tapjs/processinfo into each test process and, through NODE_OPTIONS, into every
// process a test starts and every thread of it, to record which files each loaded (for
// coverage, which this suite does not collect, and `tap --changed`). Every module those
// processes load then goes through its loader hook on a separate thread and has its source
// re-read and measured: in a profiled run of the suite that was a tenth of the servers' and API
// workers' sampled time, and ~0.7 s of CPU a server start. The servers, CLI runs and helper
// processes the tests start run without it, as `npm start` and `npm run cli` run them; any
// other NODE_OPTIONS (a developer's) is passed on.
//
// Taking tap's entries out of the child's environment is not enough: processinfo also hooks
// child_process (the process-on-spawn package) and puts itself back into the NODE_OPTIONS of
// every process spawned from a test process, whatever environment the caller passed. So
// spawnChild() starts the command through /usr/bin/env, which sets NODE_OPTIONS to the value
// chosen here (or unsets it) after that hook has run, and then execs the command in the same
// process (same pid: signals reach it).
/** `env` (default process.env) with tap's own entries taken out of NODE_OPTIONS. */
export function childEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out = { ...env };
  const kept = (env.NODE_OPTIONS ?? '').split(/\s+/).filter((o) => o !== '' && !o.includes('@tapjs/'));
  if (kept.length > 0) out.NODE_OPTIONS = kept.join(' ');
  else delete out.NODE_OPTIONS;
  return out;
}

/** The program and arguments that run `command args` with exactly `env`'s NODE_OPTIONS
 * (none when it has none), whatever a spawn hook adds on the way (see above). */
function exactNodeOptions(command: string, args: readonly string[], env: NodeJS.ProcessEnv): [string, string[]] {
  const set = env.NODE_OPTIONS !== undefined && env.NODE_OPTIONS !== '' ? [`NODE_OPTIONS=${env.NODE_OPTIONS}`] : ['-u', 'NODE_OPTIONS'];
  return ['/usr/bin/env', [...set, command, ...args]];
}

// LV_COUNT_PROCESSES=<file>: one line per service or CLI process started through the two
// spawns below ("server|cli <test file>"), and per CLI command run in-process by runCli
// ("inproc <test file>"), which scripts/count-test-processes.mjs --run sums (issue 43 counts
// them: each process costs a start-up). Unset, nothing is written.
function countLine(kind: 'server' | 'cli' | 'inproc'): void {
  const log = process.env.LV_COUNT_PROCESSES;
  if (log) fs.appendFileSync(log, `${kind} ${path.relative(ROOT, process.argv[1] ?? '?')}\n`);
}

function countProcess(command: string, args: readonly string[]): void {
  if (!process.env.LV_COUNT_PROCESSES) return;
  const line = [command, ...args].join(' ');
  const kind = /cli\/(main|bin)\.(js|ts)\b|\brun cli\b/.test(line) ? 'cli' : /(^|[\s/])src\/main\.(js|ts)\b|^npm (start|run)\b/.test(line) ? 'server' : null;
  if (kind) countLine(kind);
}

/** spawn() with tap's instrumentation kept out of the child: `options.env` (default
 * process.env) is filtered with childEnv() and its NODE_OPTIONS reaches the child as it is. */
export function spawnChild(command: string, args: readonly string[], options?: SpawnOptionsWithoutStdio): ChildProcessWithoutNullStreams;
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions): ChildProcess;
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  countProcess(command, args);
  const env = childEnv(options.env ?? process.env);
  const [file, argv] = exactNodeOptions(command, args, env);
  const child = spawn(file, argv, { ...options, env });
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  return child;
}

// Children still running when the test process exits (a test file cut off by tap's timeout,
// an uncaught error) are killed with it, and so is every process under them: otherwise each
// lingers as an orphan, holding memory and CPU, and slows every later test on a shared
// machine (seen: 18 orphan servers after timeouts; then `npm start`'s node, which outlived its
// npm killed alone, with its temporary store, for an hour).
const liveChildren = new Set<ChildProcess>();
function killLiveChildren(): void {
  const roots = [...liveChildren].map((c) => c.pid).filter((pid): pid is number => pid !== undefined);
  for (const pid of withDescendants(roots)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}
process.once('exit', killLiveChildren);
// tap ends a timed-out file with SIGALRM, a death without an 'exit' event (the case above that
// left npm start's node running): the tree goes first, then the signal is raised again for
// tap's own handler and the default action
const onAlarm = (): void => {
  killLiveChildren();
  process.removeListener('SIGALRM', onAlarm);
  process.kill(process.pid, 'SIGALRM');
};
process.on('SIGALRM', onAlarm);

/** `roots` and every process below them, read from /proc at once (an exit handler cannot
 * wait); elsewhere only the roots. */
function withDescendants(roots: number[]): number[] {
  // nothing left running (the usual exit): no scan of every process on the host
  if (roots.length === 0) return roots;
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return roots;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // the fields after the command name, which may hold spaces and parentheses itself
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const all: number[] = [];
  const stack = [...roots];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    all.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return all;
}

/** spawnSync() with tap's instrumentation kept out of the child, as spawnChild(). */
export function spawnChildSync(command: string, args: readonly string[], options: SpawnSyncOptionsWithStringEncoding): SpawnSyncReturns<string> {
  countProcess(command, args);
  const env = childEnv(options.env ?? process.env);
  const [file, argv] = exactNodeOptions(command, args, env);
  return spawnSync(file, argv, { ...options, env });
}

export interface ChildResult {
  /** the exit code; null when a signal ended the program */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** killed because it ran past `limitMs` */
  timedOut: boolean;
  /** when timed out: its threads as they were just before the kill (threadStates) */
  threads?: string;
}

/**
 * One line per thread of process `pid`, read from /proc: id, name, scheduler state, the kernel
 * function it sleeps in and its current system call number. For a child that stopped making
 * progress (a server that printed nothing in minutes, a CLI past its limit): which threads
 * exist and where each waits (a futex, a pipe, the disk) is what tells a lock-up from a slow
 * host, and it is gone once the child is killed. Best effort: '' where /proc is unreadable.
 */
export function threadStates(pid: number | undefined): string {
  if (pid === undefined) return '';
  try {
    return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
      const read = (f: string) => {
        try {
          return fs.readFileSync(`/proc/${pid}/task/${tid}/${f}`, 'utf8').trim();
        } catch {
          return '?';
        }
      };
      // stat: "tid (comm) S ...": the state follows the name's closing parenthesis
      const state = read('stat').split(') ')[1]?.split(' ')[0] ?? '?';
      return `  ${tid} ${read('comm')} state=${state} wchan=${read('wchan')} syscall=${read('syscall').split(' ')[0]}`;
    }).join('\n');
  } catch {
    return '';
  }
}

/** Runs a program to its end with spawnChild (no tap instrumentation in it) and gives back
 * what it printed: `stdin` is written and closed; past `limitMs` it is killed (SIGKILL) and
 * the result says so, so a program that stops cannot hold a test file until tap's timeout.
 * Rejects only when the program could not be started. */
export function runChild(command: string, args: readonly string[], options: Omit<SpawnOptions, 'stdio'> & { stdin?: string; limitMs?: number } = {}): Promise<ChildResult> {
  const { stdin = '', limitMs, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const p = spawnChild(command, args, { ...spawnOptions, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let threads: string | undefined;
    p.stdout!.on('data', (d) => (stdout += d));
    p.stderr!.on('data', (d) => (stderr += d));
    const timer = limitMs === undefined ? undefined : setTimeout(() => {
      timedOut = true;
      threads = threadStates(p.pid);
      p.kill('SIGKILL');
    }, limitMs);
    p.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut, ...(threads === undefined ? {} : { threads }) });
    });
    // a program that exits without reading its input (a refused start, a CLI that fails on
    // its arguments) closes the pipe: EPIPE on a stream with no listener would throw in the
    // test process, while what the program did is already in its exit and output
    p.stdin!.on('error', () => {});
    p.stdin!.end(stdin);
  });
}

/** Runs the service as `npm start` does (SERVICE_ARGS) on a fresh DATA_DIR with one API
 * worker and `env`, to its end: for a configuration it must refuse, which exits at once. The
 * limit is a hang detector only (loading the sources through tsx can take well over 30 s on a
 * loaded host). `out` is stdout and stderr together. */
export async function runServiceToExit(env: Record<string, string>): Promise<ChildResult & { out: string }> {
  const r = await runChild(process.execPath, [...SERVICE_ARGS], { cwd: ROOT, env: { ...process.env, DATA_DIR: tempDir(), WORKERS: '1', ...env }, limitMs: 120_000 });
  return { ...r, out: r.stdout + r.stderr };
}

function cliResult(code: number, stdout: string, stderr: string): CliResult {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  return { code, stdout, stderr, json };
}

/** A stream that keeps what is written to it, for a CLI run in this process. */
function textSink(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
}

/** Runs an operator CLI command against a DATA_DIR, as `npm run cli` would, but in this process:
 * the CLI's runCommand (src/cli/main.ts) with the same environment (this process's, DATA_DIR,
 * then `env`), folder (the project's), stdin, and the same result (exit code, stdout, stderr,
 * stdout parsed as JSON). A command costs its own work only, where a process of its own cost
 * a start-up (0.3 to 4.5 s of CPU on a 2-core host, the suite ran 170): issue 43. A server the
 * test started is another process on the same store, as it is for an operator (LMDB allows
 * several processes; PostgreSQL is a server). runCommand puts back what it changes for the
 * process (umask, CLOCK_FILE) and closes its store.
 * Use runCliProcess() where the program is the subject: its exit status, its streams, stdin
 * piped, the umask of the files it writes, a store that does not answer, or a command that
 * must see the store from another process. */
export async function runCli(dataDir: string, args: string[], stdin = '', env: Record<string, string> = {}, store?: import('../../src/store/index.ts').StoreBackend): Promise<CliResult> {
  // loaded on first use, as makeToken loads the store: a file that runs no command pays nothing
  const { runCommand } = await import('../../src/cli/main.ts');
  countLine('inproc');
  const out = textSink();
  const err = textSink();
  const code = await runCommand(args, { env: { ...process.env, DATA_DIR: dataDir, ...env }, cwd: ROOT, stdin: Readable.from(stdin === '' ? [] : [Buffer.from(stdin)]), stdout: out.stream, stderr: err.stream, store });
  return cliResult(code, out.text(), err.text());
}

/** Runs the operator CLI as a process of its own, exactly as `npm run cli` does (the compiled
 * program when dist/ is up to date, else the sources through tsx), against a DATA_DIR: for
 * the tests whose subject is the program (see runCli). */
export async function runCliProcess(dataDir: string, args: string[], stdin = '', env: Record<string, string> = {}): Promise<CliResult> {
  const r = await runChild(process.execPath, [...CLI_ARGS, ...args], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir, ...env }, stdin });
  return cliResult(r.code ?? -1, r.stdout, r.stderr);
}

/** The lines of a service's log that are JSON, parsed (a started server's and the in-process
 * harness's `logLines`); any other line (a warning Node printed) is left out. */
export function jsonLines(lines: readonly string[]): any[] {
  return lines.flatMap((l) => {
    try {
      return [JSON.parse(l)];
    } catch {
      return [];
    }
  });
}

/** Calls `onLine` with each whole line `stream` writes (a child's JSON log), without its newline. */
export function onLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buf = '';
  stream.on('data', (d: Buffer | string) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      onLine(line);
    }
  });
}

export interface ServerHandle {
  baseUrl: string;
  port: number;
  dataDir: string;
  /** the environment overrides it was started with (the CLI and in-process store use them) */
  env: Record<string, string>;
  proc: ChildProcess;
  logs: string[];
  /** parsed JSON log lines */
  logLines(): any[];
  /** an operator CLI command on this server's store, in this process (runCli) */
  cli(args: string[], stdin?: string): Promise<CliResult>;
  /** SIGTERM (or another signal) and wait for exit; resolves with the exit code */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string>;
  /** wait until /health/ready answers 200 */
  ready?: boolean;
  timeoutMs?: number;
  /** a program and its arguments that run the service, as `unshare --pid --fork --mount-proc`
   * starts it in a PID namespace of its own (a container's); stop() signals the service, the
   * program's child (unshare ignores SIGTERM) */
  prefix?: readonly string[];
}

/** The first child of `pid` (/proc), or null. */
function firstChild(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const first = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')[0];
    return first ? Number(first) : null;
  } catch {
    return null;
  }
}

/** Starts the real service (SERVICE_ARGS: the build `npm start` runs, or its sources) on an
 * ephemeral port with a temporary DATA_DIR. */
export async function startServer(opts: StartOptions = {}): Promise<ServerHandle> {
  const dataDir = opts.dataDir ?? tempDir();
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    WORKERS: '2',
    INFERENCE_THREADS: '1',
    WARMUP_RUNS: '2',
    // what `auto` picks on a CPU host (docs/inference-backends.md), without the start-up
    // measurement each server would otherwise repeat; the measurement itself is tested in
    // test/inference/backend-choice.test.ts, and tests of another backend say so
    INFERENCE_BACKEND: 'native',
    LOG_LEVEL: 'info',
    // the service's own start-up watchdog fires before this harness gives up on it, so a start
    // that does not finish ends with the step it waits for in its log (issue 39)
    START_TIMEOUT_SECONDS: String(Math.max(10, Math.floor((opts.timeoutMs ?? 180_000) / 1000) - 20)),
    ...opts.env,
  };
  const [program, ...args] = [...(opts.prefix ?? []), process.execPath, ...SERVICE_ARGS];
  const proc = spawnChild(program!, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  // LV_SERVER_LOG=<file>: keep every server's output for post-mortems of a failed run
  const logFile = process.env.LV_SERVER_LOG;
  if (logFile) {
    proc.stdout!.on('data', (d: Buffer) => fs.appendFileSync(logFile, d));
    proc.stderr!.on('data', (d: Buffer) => fs.appendFileSync(logFile, d));
  }
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code, signal) => {
    if (logFile) fs.appendFileSync(logFile, `\n[server pid ${proc.pid} exited code=${code} signal=${signal}]\n`);
    resolve(code);
  }));
  const port = await new Promise<number>((resolve, reject) => {
    // a hang detector, not a speed check: on a loaded shared 2-core machine a start (tsx
    // compile, WASM warm-up) has been seen to take over a minute
    // past it, the error carries the server's threads and where each waits (threadStates):
    // a start that printed nothing at all for minutes was seen once in CI, cause unknown
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs.join('\n')}\nits threads (pid ${proc.pid}):\n${threadStates(proc.pid)}`)), opts.timeoutMs ?? 180_000);
    const onLine = (line: string) => {
      logs.push(line);
      if (line.includes('"msg":"listening"')) {
        clearTimeout(timer);
        resolve(JSON.parse(line).port);
      }
    };
    onLines(proc.stdout!, onLine);
    proc.stderr!.on('data', (d: Buffer) => logs.push(d.toString()));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${logs.join('\n')}`));
    });
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const handle: ServerHandle = {
    baseUrl,
    port,
    dataDir,
    env: opts.env ?? {},
    proc,
    logs,
    exited,
    logLines: () => jsonLines(logs),
    cli: (args, stdin) => runCli(dataDir, args, stdin, opts.env),
    stop: async (signal = 'SIGTERM') => {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      const service = opts.prefix ? firstChild(proc.pid) : null;
      if (service !== null) process.kill(service, signal);
      else proc.kill(signal);
      return exited;
    },
  };
  if (opts.ready) await waitReady(baseUrl, opts.timeoutMs ?? 120_000);
  return handle;
}

export async function waitReady(baseUrl: string, timeoutMs = 120_000): Promise<any> {
  let last: unknown;
  try {
    return await waitFor(async () => {
      const r = await fetch(`${baseUrl}/health/ready`);
      last = await r.json();
      return r.status === 200 ? last : undefined;
    }, { timeoutMs, intervalMs: 200, what: '/health/ready to answer 200' });
  } catch (err) {
    throw new Error(`not ready after ${timeoutMs} ms: ${JSON.stringify(last)} (${(err as Error).message})`);
  }
}

/** Creates a token in the server's store, in-process, as the CLI's `token create` does (see
 * helpers/store.ts); a handle without a DATA_DIR (only a `cli`) goes through the CLI. */
export async function makeToken(server: { cli: ServerHandle['cli']; dataDir?: string; env?: Record<string, string>; store?: import('../../src/store/index.ts').StoreBackend }, grants: string[], extra: string[] = []): Promise<{ id: string; token: string; name: string }> {
  // token names are unique: a fresh one per call
  const name = `test-${randomUUID()}`;
  if (server.dataDir !== undefined) {
    // loaded on first use: the store and its configuration (with TypeBox, some hundreds of
    // modules through tsx's loader thread) cost a test process ~0.45 s of CPU, which the
    // files that never make a token in-process need not pay
    const { createTokenIn } = await import('./store.ts');
    const made = await createTokenIn({ dataDir: server.dataDir, env: server.env ?? {}, store: server.store }, name, grants, extra);
    return { ...made, name };
  }
  const r = await server.cli(['token', 'create', '--name', name, ...grants.flatMap((g) => ['--grant', g]), ...extra]);
  if (r.code !== 0) throw new Error(`token create failed: ${r.stderr}`);
  return { id: r.json.id, token: r.json.token, name };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
