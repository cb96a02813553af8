import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from './observability/index.ts';
import { currentProcess, holderAlive } from './store/index.ts';

/** The longest a drain waits for in-flight calls before the process stops anyway; the
 * systemd unit's TimeoutStopSec must stay above it (test/deploy/systemd-unit.test.ts checks). */
export const DRAIN_TIMEOUT_MS = 30_000;

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

export function markRunning(dataDir: string): () => void {
  fs.writeFileSync(serverFile(dataDir), `${JSON.stringify({ ...currentProcess(), started_at: new Date().toISOString() })}\n`);
  return () => fs.rmSync(serverFile(dataDir), { force: true });
}

/** The server running on `dataDir`, or null. */
export function runningServer(dataDir: string): { pid: number; started_at: string } | null {
  try {
    const s = JSON.parse(fs.readFileSync(serverFile(dataDir), 'utf8')) as { pid: number; pid_start: string | null; started_at: string };
    return typeof s.pid === 'number' && holderAlive(s) ? s : null;
  } catch {
    return null;
  }
}
