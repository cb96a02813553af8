import { readFileSync, readlinkSync } from 'node:fs';

// A reservation names the process that holds it. A pid alone is not enough: after a crash
// the old pid may belong to an unrelated process, and trusting it would keep the units
// reserved forever. On Linux the pid plus its start time (/proc/<pid>/stat, field 22)
// identifies one process for the life of the machine.
//
// Only within one PID namespace, though, and one boot. A server in a container is pid 1 of
// its own namespace: read from the host, or from another container on the same volume, that
// pid names another process (the host's init, or the reader itself), so a live server's mark
// counted as a crashed one's and `restore` ran under it. So the identity also says which PID
// namespace its pid is counted in (the inode of /proc/self/ns/pid) and which boot its start
// time counts from (/proc/sys/kernel/random/boot_id); a holder of another namespace or boot is
// not judged by its pid at all (holderState says 'elsewhere', and each reader decides).

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

/** The PID namespace this process's pid counts in: the inode number of /proc/self/ns/pid. */
function ownPidNamespace(): string | null {
  try {
    return /^pid:\[(\d+)\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? null;
  } catch {
    return null;
  }
}

function ownBootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim() || null;
  } catch {
    return null;
  }
}

const ownStart = processStartTime(process.pid);
const hasProc = ownStart !== null;
const ownNamespace = ownPidNamespace();
const ownBoot = ownBootId();

export interface ProcessIdentity {
  pid: number;
  /** null where /proc is not available */
  pid_start: string | null;
  /** the PID namespace `pid` counts in (inode of /proc/self/ns/pid); null where it cannot be
   * read; absent on records written before it was kept */
  pid_ns?: string | null;
  /** the kernel boot `pid_start` counts from; null where it cannot be read */
  boot_id?: string | null;
}

export function currentProcess(): ProcessIdentity {
  return { pid: process.pid, pid_start: ownStart, pid_ns: ownNamespace, boot_id: ownBoot };
}

/** What a holder's identity says of it here: 'alive' or 'gone', judged by its pid and start
 * time, or 'elsewhere' when its pid is not one of this PID namespace and boot (another
 * container, the host seen from a container, an earlier boot, another machine on a shared
 * volume; or either side cannot tell), which its pid cannot answer. Our own pid is a previous
 * run of this process (the callers judge other holders, never themselves). Records of builds
 * that kept no namespace are judged by pid as they always were; records without a start time,
 * or machines without /proc, fall back to signal 0. */
export function holderState(owner: { pid: number; pid_start?: string | null; pid_ns?: string | null; boot_id?: string | null }): 'alive' | 'gone' | 'elsewhere' {
  if (owner.pid_ns !== undefined) {
    // both unknown (no /proc on either side, as before namespaces were kept): the pid it is
    const unknown = owner.pid_ns === null && ownNamespace === null;
    if (!unknown && (owner.pid_ns === null || owner.pid_ns !== ownNamespace || (owner.boot_id ?? null) !== ownBoot)) return 'elsewhere';
  }
  if (owner.pid === process.pid) return 'gone';
  if (hasProc && owner.pid_start != null) return processStartTime(owner.pid) === owner.pid_start ? 'alive' : 'gone';
  try {
    process.kill(owner.pid, 0);
    return 'alive';
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM' ? 'alive' : 'gone';
  }
}

/** Whether the process that wrote a reservation may still be running, for start-up recovery:
 * a holder of another PID namespace or boot counts as gone. Recovery runs in a server that
 * holds DATA_DIR's mark (lifecycle.ts markRunning), which no other live server can hold, in any
 * namespace; only servers reserve, so such a holder is an earlier run: above all the server of a
 * container that crashed and was started again (a new container is a new namespace), whose
 * calls must be refunded, not held for ever. */
export function holderAlive(owner: { pid: number; pid_start?: string | null; pid_ns?: string | null; boot_id?: string | null }): boolean {
  return holderState(owner) === 'alive';
}
