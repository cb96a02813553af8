import fs from 'node:fs';
import path from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { ConfigError } from '../config/index.ts';

// DATA_DIR holds the store (tokens' hashes, usage, audit with client addresses), the signing
// keys and the demo images: nothing in it is for other accounts on the host (security issue
// 29). Explicit modes at each place that creates a file are not enough: LMDB, the demo
// archive and the model-set request files create theirs with the process umask, which under
// `npm start` from a shell is usually 022 (world-readable).
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
const PRIVATE_UMASK = 0o077;

/** Every folder and file this process creates from now on is private to its user. The
 * CLI calls only this: it may run with DATABASE_URL from any folder, where creating a
 * DATA_DIR would leave a stray one (whatever writes under DATA_DIR creates it, 0700). */
export function privateUmask(): number | null {
  // worker threads cannot set the umask (and need not: it is the process's)
  // the umask it replaces (null on a worker thread): the CLI run inside a test process puts it back
  return isMainThread ? process.umask(PRIVATE_UMASK) : null;
}

/** Once per process, on the main thread, before anything is written: every folder and file
 * this process creates from here on is private to its user (umask 077, process-wide, so it
 * covers the API worker threads started later and the files of lmdb-js), and DATA_DIR
 * itself is created, or narrowed, to 0700. Returns what could not be made private (a
 * DATA_DIR owned by another user), for the caller to log: refusing to start would turn a
 * hardening step into an outage. */
export function privateDataDir(dataDir: string): string[] {
  privateUmask();
  makeDataDir(dataDir);
  const mode = fs.statSync(dataDir).mode & 0o777;
  if (mode === PRIVATE_DIR_MODE) return [];
  try {
    // a folder made beforehand by `mkdir data` under umask 022
    fs.chmodSync(dataDir, PRIVATE_DIR_MODE);
    return [];
  } catch (e) {
    return [`DATA_DIR ${dataDir} has mode ${mode.toString(8)} and cannot be made 0700: ${(e as Error).message}`];
  }
}

/** DATA_DIR made (its parents too) or found as a folder; a DATA_DIR that cannot be is a
 * configuration error naming it (one line, where it was a stack trace). A parent that exists
 * gets a plain mkdir: Node's recursive one loops for ever under /proc/sys, where no signal
 * could stop the start. Everything that makes DATA_DIR goes through this (the start, the
 * server mark a restore takes). */
export function makeDataDir(dataDir: string): void {
  try {
    if (fs.existsSync(path.dirname(dataDir))) {
      try {
        fs.mkdirSync(dataDir, { mode: PRIVATE_DIR_MODE });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    } else {
      fs.mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
    }
    if (!fs.statSync(dataDir).isDirectory()) throw new Error('it is not a folder');
  } catch (e) {
    throw new ConfigError(`DATA_DIR ${dataDir} cannot be used: ${(e as Error).message}`);
  }
}

/** Narrows files made before the process owned them privately (a store created by an older
 * build under umask 022); a file that is gone or not ours is left as it is. */
export function narrowToPrivate(files: string[]): void {
  for (const file of files) {
    try {
      if ((fs.statSync(file).mode & 0o077) !== 0) fs.chmodSync(file, PRIVATE_FILE_MODE);
    } catch {
      // ENOENT (not created yet), EPERM (another owner): nothing this process can change
    }
  }
}
