import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from './observability/index.ts';
import { currentProcess, holderAlive, makeDataDir } from './store/index.ts';

export { DRAIN_TIMEOUT_MS } from './config/index.ts';

/**
 * `npm start` runs the script through `sh -c`; Debian's dash does not exec a lone command,
 * so a shell would sit between npm and node and swallow the SIGTERM npm forwards. The start
 * script therefore says `exec node ...`: npm's signal then reaches this process. As a second
 * line, for a parent that dies without forwarding anything (npm killed with SIGKILL, a
 * wrapper shell killed), the service drains when it is re-parented: an orphan serving the
 * port is invisible to the supervisor that thinks it stopped it. Node has no
 * PR_SET_PDEATHSIG, so the parent pid is polled; once a second is cheap and bounds the delay.
 * A service started directly by systemd (parent pid 1) has nothing to watch.
 */
export function watchParent(log: Logger, stop: () => void): void {
  const parent = process.ppid;
  if (parent <= 1) return;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    log.warn({ parent }, 'parent process is gone; draining');
    stop();
  }, 1000);
  timer.unref();
}

/** DATA_DIR/server.json names the running server (pid and start time), so that tools which
 * must not run beside it (restore) can refuse. A server that crashed leaves the file; its pid
 * and start time then name no live process, and the file is ignored. */
const serverFile = (dataDir: string) => path.join(dataDir, 'server.json');

/** How old a mark that does not read may be and still be a server starting (made, not yet
 * written); an older one is a crash's leftover. */
const UNWRITTEN_MARK_MS = 5_000;

function readsAsMark(file: string): boolean {
  try {
    return typeof (JSON.parse(fs.readFileSync(file, 'utf8')) as { pid?: unknown }).pid === 'number';
  } catch {
    return false;
  }
}

/** A server started on a DATA_DIR another live server holds. */
export class ServerRunningError extends Error {}

/** Marks this process as the server of `dataDir`, or refuses (ServerRunningError) when a live
 * server already is: one server per DATA_DIR. The mark is made with O_EXCL, so of two servers
 * starting at once one is refused; one a crashed server left is replaced. The returned remover
 * deletes it only while it still names this process. Before, a second server overwrote the
 * first one's mark and removed it on its way out (a start refused for its port, or a stop):
 * `restore` then ran under the live server, and the charges it answered went into the store
 * restore moved aside. */
export function markRunning(dataDir: string, role: MarkRole = 'server'): () => void {
  const file = serverFile(dataDir);
  const me = currentProcess();
  makeDataDir(dataDir);
  for (;;) {
    try {
      fs.writeFileSync(file, `${JSON.stringify({ ...me, started_at: new Date().toISOString(), ...(role === 'server' ? {} : { role }) })}\n`, { flag: 'wx' });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const other = runningServer(dataDir);
    if (other) throw new ServerRunningError(`a ${other.role ?? 'server'} (pid ${other.pid}, started ${other.started_at}) already runs on DATA_DIR ${dataDir}: one server per DATA_DIR, and none beside a restore (wait for it or stop it, or give this one another DATA_DIR)`);
    // a mark that does not read is one a server starting this instant has made and not yet
    // written (refused: it is the server), unless it is old (a crash at that instant)
    const age = Date.now() - (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0);
    if (!readsAsMark(file) && age < UNWRITTEN_MARK_MS) throw new ServerRunningError(`another server is starting on DATA_DIR ${dataDir}: one server per DATA_DIR`);
    // a crashed server's mark
    fs.rmSync(file, { force: true });
  }
  return () => {
    try {
      const s = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid?: unknown; pid_start?: unknown };
      if (s.pid === me.pid && (s.pid_start ?? null) === (me.pid_start ?? null)) fs.rmSync(file, { force: true });
    } catch {
      // gone already, or not ours to judge: left alone
    }
  };
}

/** Who holds DATA_DIR's mark: a server, or a `restore` (which holds it for its whole run, so
 * that a server started meanwhile is refused instead of serving the store restore then moves
 * aside, its charges with it). */
export type MarkRole = 'server' | 'restore';

/** The server (or restore) running on `dataDir`, or null. */
export function runningServer(dataDir: string): { pid: number; started_at: string; role?: MarkRole } | null {
  try {
    const s = JSON.parse(fs.readFileSync(serverFile(dataDir), 'utf8')) as { pid: number; pid_start: string | null; started_at: string; role?: MarkRole };
    return typeof s.pid === 'number' && holderAlive(s) ? s : null;
  } catch {
    return null;
  }
}

/** The backstop's code (a thread of its own, see StartupWatchdog): it sleeps on the shared flag
 * (0 starting, 1 started or stopping, 2 the main thread's own watchdog is ending the start)
 * and, when the main thread has not moved it in time, writes the fatal line itself and kills
 * the process. */
const BACKSTOP = `
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { state, firstMs, graceMs, pid, seconds } = workerData;
const flag = new Int32Array(state, 0, 1);
const length = new Int32Array(state, 4, 1);
const text = new Uint8Array(state, 8);
if (Atomics.wait(flag, 0, 0, firstMs) === 'timed-out' || (Atomics.load(flag, 0) === 2 && Atomics.wait(flag, 0, 2, graceMs) === 'timed-out')) {
  const step = Buffer.from(text.subarray(0, Atomics.load(length, 0))).toString();
  const msg = 'start-up did not finish within START_TIMEOUT_SECONDS (' + seconds + ' s) and the main thread does not answer: still waiting for ' + step + '; killing the process';
  fs.writeSync(1, JSON.stringify({ level: 60, time: new Date().toISOString(), pid, thread: 'start-watchdog', waiting_for: step, START_TIMEOUT_SECONDS: seconds, msg }) + '\\n');
  fs.writeSync(2, msg + '\\n');
  process.kill(pid, 'SIGKILL');
}
`;

/** How long past START_TIMEOUT_SECONDS the backstop waits for the main thread's own watchdog
 * to end the start (it closes the inference engine first, up to about 35 s). */
const BACKSTOP_GRACE_MS = 45_000;

/**
 * The start-up watchdog: start-up goes through named steps (`step()`), and a start that has
 * not finished (`done()`) within `seconds` logs the step it is waiting for, how long that step
 * has taken, and exits through `expire` with a non-zero code. A start that hangs (a store
 * that never answers, an API worker that never listens) is then a logged failure a supervisor
 * restarts, never a process that sits there saying nothing (issue 39). The timer is ref'd: a
 * start whose awaited step holds nothing else open still ends with the message. 0 disables it.
 *
 * A timer cannot fire on a main thread that is itself stuck (issue 39's hang was the main
 * thread waiting on a mutex it held, src/signing/keys.ts), so a backstop thread, blocked on a
 * shared flag and costing nothing meanwhile, does the same BACKSTOP_GRACE_MS later should the
 * main thread not have answered: it writes the fatal line to stdout and stderr itself and kills
 * the process (SIGKILL: no handler can run on a thread that does not run).
 */
export class StartupWatchdog {
  private current = 'loading';
  private stepSince = Date.now();
  private readonly since = Date.now();
  private timer: NodeJS.Timeout | null = null;
  /** flag, step length, step text (UTF-8): what the backstop thread reads */
  private readonly state = new SharedArrayBuffer(8 + 512);
  private readonly flag = new Int32Array(this.state, 0, 1);

  constructor(private readonly log: Logger, readonly seconds: number, private readonly expire: (step: string) => void) {
    if (seconds <= 0) return;
    this.timer = setTimeout(() => this.fire(), seconds * 1000);
    this.publish();
    const backstop = new Worker(BACKSTOP, {
      eval: true,
      workerData: { state: this.state, firstMs: seconds * 1000 + 5_000, graceMs: BACKSTOP_GRACE_MS, pid: process.pid, seconds },
      resourceLimits: { maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 1 },
      stdout: false,
      stderr: false,
    });
    backstop.unref();
    // a start that ends any other way (a refused configuration, a stop) lets it go
    process.once('exit', () => this.settle(1));
  }

  /** the step start-up is in now (what the watchdog names if it fires) */
  get waitingFor(): string {
    return this.current;
  }

  step(name: string): void {
    this.current = name;
    this.stepSince = Date.now();
    this.publish();
  }

  /** Start-up is over (listening, or stopping on request): neither watchdog fires. */
  done(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.settle(1);
  }

  private publish(): void {
    const bytes = new TextEncoder().encode(this.current).subarray(0, 512);
    new Uint8Array(this.state, 8).set(bytes);
    Atomics.store(new Int32Array(this.state, 4, 1), 0, bytes.length);
  }

  private settle(value: 1 | 2): void {
    if (Atomics.load(this.flag, 0) === 1) return;
    Atomics.store(this.flag, 0, value);
    Atomics.notify(this.flag, 0);
  }

  private fire(): void {
    this.timer = null;
    // the main thread answers: the backstop gives it time to end the start its own way
    this.settle(2);
    const fields = { waiting_for: this.current, step_seconds: Math.round((Date.now() - this.stepSince) / 1000), start_seconds: Math.round((Date.now() - this.since) / 1000), START_TIMEOUT_SECONDS: this.seconds };
    this.log.fatal(fields, `start-up did not finish within START_TIMEOUT_SECONDS (${this.seconds} s): still waiting for ${this.current}; exiting`);
    process.stderr.write(`start-up did not finish within ${this.seconds} s: still waiting for ${this.current}\n`);
    this.expire(this.current);
  }
}
