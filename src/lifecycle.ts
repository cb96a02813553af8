import type { Logger } from './observability/logger.ts';

/** The longest a drain waits for in-flight calls before the process stops anyway; the
 * systemd unit's TimeoutStopSec must stay above it (test/ops/deploy.test.ts checks). */
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
