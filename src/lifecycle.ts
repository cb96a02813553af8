import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from './observability/index.ts';
import { currentProcess, holderState, makeDataDir, type ProcessIdentity } from './store/index.ts';

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

/** DATA_DIR/server.json names the running server (its process identity: pid, start time, PID
 * namespace and boot, store/owner.ts), so that tools which must not run beside it (restore) can
 * refuse. A server that crashed leaves the file; its identity then names no live process, and
 * the file is ignored. A pid names a process only in its own PID namespace (a server in a
 * container is pid 1 of its own): a mark of another namespace, or boot, is judged by its time
 * instead, which its holder refreshes every MARK_REFRESH_MS while it runs (markRunning). */
const serverFile = (dataDir: string) => path.join(dataDir, 'server.json');

/** How often the holder of a mark (a server, a restore) sets the mark's time to now. */
export const MARK_REFRESH_MS = 5_000;
/** A mark of another PID namespace is its holder's while it has been refreshed within this many
 * of its refresh intervals: several, so that a holder whose timer runs late (a loaded host, a
 * long garbage collection) is not taken for a dead one. */
export const MARK_STALE_REFRESHES = 6;

/** How old a mark that does not read may be and still be a server starting (made, not yet
 * written); an older one is a crash's leftover. */
const UNWRITTEN_MARK_MS = 5_000;

/** What the mark says: the holder, and how often it refreshes the mark (planted marks of tests
 * say a shorter interval; a mark says its own, so that its readers need no setting). */
interface Mark extends ProcessIdentity {
  started_at: string;
  role?: MarkRole;
  refresh_ms?: number;
}

/** The mark as read: its text and time, or null when there is none. */
interface Seen {
  text: string;
  mtimeMs: number;
}

function look(file: string): Seen | null {
  try {
    const text = fs.readFileSync(file, 'utf8');
    const st = fs.statSync(file, { throwIfNoEntry: false });
    return st ? { text, mtimeMs: st.mtimeMs } : null;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

function parseMark(text: string): Mark | null {
  try {
    const m = JSON.parse(text) as Mark;
    return typeof m.pid === 'number' ? m : null;
  } catch {
    return null;
  }
}

/** How long a mark of another namespace stays its holder's without a refresh. */
function staleAfterMs(mark: Mark): number {
  const every = typeof mark.refresh_ms === 'number' && mark.refresh_ms >= 100 && mark.refresh_ms <= 60_000 ? mark.refresh_ms : MARK_REFRESH_MS;
  return every * MARK_STALE_REFRESHES;
}

/** A server started on a DATA_DIR another live server holds. */
export class ServerRunningError extends Error {}

/** Marks this process as the server of `dataDir` (or its restore: `role`), or refuses
 * (ServerRunningError) when a live server or restore already holds it: one per DATA_DIR. The
 * mark is made with O_EXCL, so of two processes starting at once one is refused; one a crashed
 * holder left is replaced. A mark of another PID namespace or boot is watched: refreshed within
 * a refresh interval or two, its holder is alive and this one is refused; not refreshed until
 * it is MARK_STALE_REFRESHES intervals old (at most that long a wait), its holder is gone. While
 * the mark is held its time is refreshed; the returned remover stops that and deletes the mark
 * only while it still names this process. Before, a second server overwrote the first one's
 * mark and removed it on its way out: `restore` then ran under the live server, and the charges
 * it answered went into the store restore moved aside; and a server in another container was
 * read by its pid (1) as the host's init or the reader itself, a crashed server. */
export async function markRunning(dataDir: string, role: MarkRole = 'server'): Promise<() => void> {
  const file = serverFile(dataDir);
  const me = currentProcess();
  makeDataDir(dataDir);
  const text = `${JSON.stringify({ ...me, started_at: new Date().toISOString(), ...(role === 'server' ? {} : { role }), refresh_ms: MARK_REFRESH_MS })}\n`;
  for (;;) {
    try {
      fs.writeFileSync(file, text, { flag: 'wx' });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const seen = look(file);
    if (!seen) continue;
    const other = parseMark(seen.text);
    if (!other) {
      // a mark that does not read is one a process starting this instant has made and not yet
      // written (refused: it is the server), unless it is old (a crash at that instant)
      if (Date.now() - seen.mtimeMs < UNWRITTEN_MARK_MS) throw new ServerRunningError(`another server is starting on DATA_DIR ${dataDir}: one server per DATA_DIR`);
    } else {
      const state = holderState(other);
      if (state === 'alive') throw runningError(dataDir, other, '');
      if (state === 'elsewhere') {
        const verdict = await watchMark(file, seen, other);
        if (verdict === 'changed') continue;
        if (verdict === 'alive') throw runningError(dataDir, other, ' in another PID namespace, which refreshes its mark');
      }
    }
    // a crashed holder's mark, still the one judged
    if (look(file)?.text === seen.text) fs.rmSync(file, { force: true });
  }
  const refresh = setInterval(() => {
    try {
      const at = new Date();
      fs.utimesSync(file, at, at);
    } catch {
      // removed (by a remover of this process on its way out): nothing to refresh
    }
  }, MARK_REFRESH_MS);
  // never what keeps a process alive (a CLI's restore ends when its work does)
  refresh.unref();
  return () => {
    clearInterval(refresh);
    const mark = parseMark(look(file)?.text ?? '');
    // gone already, or not ours: left alone
    if (mark && mark.pid === me.pid && (mark.pid_start ?? null) === me.pid_start && (mark.pid_ns ?? null) === (me.pid_ns ?? null)) fs.rmSync(file, { force: true });
  };
}

function runningError(dataDir: string, other: Mark, where: string): ServerRunningError {
  return new ServerRunningError(`a ${other.role ?? 'server'} (pid ${other.pid}${where}, started ${other.started_at}) already runs on DATA_DIR ${dataDir}: one server per DATA_DIR, and none beside a restore (wait for it or stop it, or give this one another DATA_DIR)`);
}

/** Watches a mark of another PID namespace (`seen`, naming `other`) until it tells: 'alive'
 * when its holder refreshes it, 'stale' when it has not been refreshed for its stale time
 * (by its age, or by this process's own clock since it looked: a mark another machine dated
 * in the future is not believed for longer), 'changed' when another mark took its place. */
async function watchMark(file: string, seen: Seen, other: Mark): Promise<'alive' | 'stale' | 'changed'> {
  const staleMs = staleAfterMs(other);
  const since = performance.now();
  const every = Math.min(250, staleMs / MARK_STALE_REFRESHES / 2);
  for (;;) {
    const now = look(file);
    if (!now || now.text !== seen.text) return 'changed';
    if (now.mtimeMs !== seen.mtimeMs) return 'alive';
    if (Date.now() - now.mtimeMs >= staleMs || performance.now() - since >= staleMs) return 'stale';
    // a file gives no event to wait for that reaches across containers on every file system
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Who holds DATA_DIR's mark: a server, or a `restore` (which holds it for its whole run, so
 * that a server started meanwhile is refused instead of serving the store restore then moves
 * aside, its charges with it). */
export type MarkRole = 'server' | 'restore';

/** The server (or restore) running on `dataDir`, or null, at one look: a mark of another PID
 * namespace counts while it is fresh (refreshed within its stale time). */
export function runningServer(dataDir: string): { pid: number; started_at: string; role?: MarkRole } | null {
  try {
    const seen = look(serverFile(dataDir));
    const mark = seen && parseMark(seen.text);
    if (!seen || !mark) return null;
    const state = holderState(mark);
    return state === 'alive' || (state === 'elsewhere' && Date.now() - seen.mtimeMs < staleAfterMs(mark)) ? mark : null;
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
