import { readFileSync } from 'node:fs';

// A reservation names the process that holds it. A pid alone is not enough: after a crash
// the old pid may belong to an unrelated process, and trusting it would keep the units
// reserved forever. On Linux the pid plus its start time (/proc/<pid>/stat, field 22)
// identifies one process for the life of the machine.

/** Start time of `pid` in clock ticks since boot, or null when it has no /proc entry. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // the command name (field 2) may hold spaces and parentheses; the fields after it are fixed
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

const ownStart = processStartTime(process.pid);
const hasProc = ownStart !== null;

export interface ProcessIdentity {
  pid: number;
  /** null where /proc is not available */
  pid_start: string | null;
}

export function currentProcess(): ProcessIdentity {
  return { pid: process.pid, pid_start: ownStart };
}

/** Whether the process that wrote a reservation may still be running. Our own pid is a
 * previous run of this service (recovery runs before serving). Records written without a
 * start time, or machines without /proc, fall back to signal 0. */
export function holderAlive(owner: { pid: number; pid_start?: string | null }): boolean {
  if (owner.pid === process.pid) return false;
  if (hasProc && owner.pid_start != null) return processStartTime(owner.pid) === owner.pid_start;
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
