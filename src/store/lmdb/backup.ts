import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { StoreBackend } from '../backend.ts';
import { embeddedStore } from './backend.ts';
import { isLmdbDataFile, type Store } from './open.ts';
import { orphanPending } from './recovery.ts';
import { removeLeftovers, removeKilledRestores, restoreScratch } from '../leftovers.ts';

/** Not an HTTP error: backup and restore are operator commands; the CLI prints it and exits. */
export class BackupError extends Error {}

/**
 * A consistent copy of the live LMDB store in one file, made while the service runs:
 * mdb_env_copy2 with MDB_CP_COMPACT reads one snapshot (a read transaction, so writers go
 * on) and writes only live pages. LMDB writes `data.mdb` into a directory, so the copy is
 * made in a scratch directory beside the target and renamed into place: an interrupted
 * backup never leaves a partial file under the requested name. An existing file is never
 * overwritten.
 */
export async function backupStore(backend: StoreBackend, file: string, keysDir: string | null = null): Promise<{ file: string; bytes: number; keys: BackupKeys | null; leftovers_removed?: string[] }> {
  const store = embeddedStore(backend);
  // PostgreSQL has its own consistent dump (docs/operations.md, Backup and restore)
  if (!store) throw new BackupError('backup copies the LMDB store; with DATABASE_URL use pg_dump (docs/operations.md, Backup and restore)');
  const target = path.resolve(file);
  const leftovers = removeKilledBackups(path.dirname(target));
  if (fs.existsSync(target)) throw new BackupError(`${target} exists; a backup never overwrites a file`);
  if (keysDir !== null && fs.existsSync(keysBeside(target))) throw new BackupError(`${keysBeside(target)} exists; a backup never overwrites a file`);
  const scratch = path.join(path.dirname(target), `.${path.basename(target)}.partial-${randomBytes(4).toString('hex')}`);
  // not recursive: a folder that is missing is a mistyped path, said as such (recursive, it was
  // made, and a read-only file system's EROFS came back as ENOENT)
  try {
    fs.mkdirSync(scratch, { mode: 0o700 });
  } catch (e) {
    throw new BackupError(`cannot write beside ${target}: ${(e as Error).message}; nothing was written`);
  }
  try {
    try {
      await store.root.backup(scratch, true);
    } catch (e) {
      // lmdb-js throws the copy's failure with its text only (no code): a full disk was an
      // unexpected error (exit 1, "No space left on device"), not the backup's refusal
      throw new BackupError(`backup to ${target} failed while the store was copied: ${(e as Error).message}; nothing was written`);
    }
    const copy = path.join(scratch, 'data.mdb');
    fs.chmodSync(copy, 0o600);
    // the keys are copied into the scratch folder too, and both move into place only once
    // complete: a disk that filled while the keys were copied left the store file under its
    // final name, a keys folder without `current`, and a backup that could neither be made
    // again (the name exists) nor restored
    const keys = keysDir === null ? null : copyKeys(keysDir, path.join(scratch, 'keys'));
    // link + unlink rather than rename: link fails if the target appeared meanwhile
    fs.linkSync(copy, target);
    if (keys?.dir) {
      try {
        fs.renameSync(keys.dir, keysBeside(target));
      } catch (e) {
        fs.rmSync(target, { force: true });
        throw e;
      }
    }
    return { file: target, bytes: fs.statSync(target).size, keys: keys === null ? null : { dir: keys.dir ? keysBeside(target) : null, files: keys.files }, ...(leftovers.length > 0 ? { leftovers_removed: leftovers } : {}) };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'EROFS' || code === 'EACCES' || code === 'EPERM' || code === 'EIO') {
      throw new BackupError(`backup to ${target} failed: ${(e as Error).message}; nothing was written`);
    }
    throw e;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** How long a backup's scratch folder may go unwritten before a later backup takes it for one
 * a killed backup left (kill -9, a crash, a stop of the machine: the `finally` that removes it
 * never ran, and it stayed for ever, as large as the store). A live backup writes its copy the
 * whole time it runs. */
export const LEFTOVER_MS = 10 * 60_000;
/** a backup's scratch folder (backupStore): `.<file name>.partial-<random>` beside the file */
const BACKUP_SCRATCH = /^\..+\.partial-[0-9a-f]{8}$/;
/** what a backup's scratch folder holds: the store's copy, and the keys' */
const BACKUP_SCRATCH_ENTRIES = new Set(['data.mdb', 'lock.mdb', 'keys']);
/** When the backup scratch folder `dir` or anything in it last changed (ms), or null when it is
 * not a folder that holds only what a backup writes there (one of that name made by someone
 * else is not ours to remove). */
function backupLastWritten(dir: string): number | null {
  try {
    let newest = 0;
    const walk = (p: string, top: boolean): boolean => {
      const st = fs.lstatSync(p);
      newest = Math.max(newest, st.mtimeMs);
      if (!st.isDirectory()) return st.isFile();
      for (const name of fs.readdirSync(p)) {
        if (top && !BACKUP_SCRATCH_ENTRIES.has(name)) return false;
        if (!walk(path.join(p, name), false)) return false;
      }
      return true;
    };
    return fs.lstatSync(dir).isDirectory() && walk(dir, true) ? newest : null;
  } catch {
    return null;
  }
}

/** Removes the scratch folders killed backups left in `dir` (any backup's: the next one is
 * usually another day's name), those unwritten for LEFTOVER_MS; answers which. */
export function removeKilledBackups(dir: string, at = Date.now()): string[] {
  return removeLeftovers(dir, BACKUP_SCRATCH, (p) => {
    const written = backupLastWritten(p);
    return written !== null && at - written >= LEFTOVER_MS;
  });
}

export interface BackupKeys {
  /** the folder beside the backup file holding the signing keys, or null when DATA_DIR had none */
  dir: string | null;
  files: number;
}

const keysBeside = (file: string) => `${file}.keys`;

/** The signing keys of DATA_DIR copied into `target` (0700, files 0600), which backupStore
 * moves beside the backup (`<file>.keys/`): a store restored without the keys that signed its
 * verdicts would serve verdicts nobody can check against the old ones. `dir` is null when
 * DATA_DIR has no keys folder. */
function copyKeys(keysDir: string, target: string): BackupKeys {
  if (!fs.existsSync(keysDir)) return { dir: null, files: 0 };
  fs.mkdirSync(target, { mode: 0o700 });
  let files = 0;
  for (const name of fs.readdirSync(keysDir)) {
    const from = path.join(keysDir, name);
    // lstat: a link in DATA_DIR/keys is not a key the service wrote; copied, it would carry
    // whatever it points at into the backup
    if (!fs.lstatSync(from).isFile()) continue;
    fs.copyFileSync(from, path.join(target, name));
    fs.chmodSync(path.join(target, name), 0o600);
    files++;
  }
  return { dir: target, files };
}

/**
 * Reads every record of every database of the LMDB store in `dir`, in a child process, which
 * answers how many it read or why it could not. A child, because LMDB maps the file: a page
 * past the end of a truncated file is a SIGBUS, and a damaged one may be a SIGSEGV, either of
 * which ends the process that reads it; opening the copy only read its meta pages, so a backup
 * with damaged pages was restored (exit 0) and every verify call then failed. The child needs
 * nothing of this build but lmdb, so it runs as a short script of its own.
 */
const READ_ALL = `
const [lmdb, dir] = process.argv.slice(1);
const mod = await import(lmdb);
const open = mod.open ?? mod.default.open;
const root = open({ path: dir, readOnly: true, maxDbs: 64, compression: false });
let records = 0;
// the names first: opening a database while the main one is read invalidates that read
const names = [...root.getKeys({})].map(String);
for (const name of names) {
  const db = root.openDB({ name });
  for (const { value } of db.getRange({})) { if (value === undefined) throw new Error('a record of ' + name + ' does not read'); records++; }
}
await root.close();
process.stdout.write(String(records));
`;

async function readWhole(dir: string): Promise<{ records: number } | { why: string }> {
  const lmdb = pathToFileURL(createRequire(import.meta.url).resolve('lmdb')).href;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', READ_ALL, lmdb, dir], { encoding: 'utf8', maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve({ records: Number(stdout) });
      const signal = (err as { signal?: string | null }).signal;
      const line = stderr.split('\n').find((l) => /Error|MDB_/.test(l)) ?? stderr.trim().split('\n')[0] ?? '';
      resolve({ why: signal ? `reading it ended the reader with ${signal} (a truncated or damaged file)` : line.trim() || `the reader exited with ${String((err as { code?: unknown }).code)}` });
    });
  });
}

export interface RestoreResult {
  restored: string;
  store: string;
  /** where the store that was there went (never deleted), or null */
  previous_store: string | null;
  /** every record of the backup was read before anything moved: how many */
  records_read: number;
  /** calls in flight when the backup was made (reservations pending): the first start on the
   * restored store refunds them and frees their keys (recovery.ts orphanPending) */
  in_flight_released: number;
  keys: ({ restored_from: string; previous_keys: string | null } & Record<string, unknown>) | { restored_from: null; note: string };
  /** the copies restores killed mid-way had left in DATA_DIR, removed (absent when none) */
  leftovers_removed?: string[];
}

/** The keys folder a restore writes, checked and prepared before anything moves (the
 * caller's: signing/restore.ts keysForRestore), with what to report about it. */
export interface PreparedKeys {
  from: string;
  files: Map<string, string>;
  report: Record<string, unknown>;
}

/** How a restore comes by its keys folder: `prepare` reads the backup's keys and the
 * revocations of the DATA_DIR being replaced, and `locked` runs it, and the swap, holding
 * DATA_DIR's keys lock (signing/keys.ts withKeysLock). A `keys revoke` that came between the
 * read and the swap used to land in the folder the swap moved aside: the leaked key was current
 * again. Now it waits for the swap and lands in the restored folder, or ran before the read and
 * is kept. */
export interface RestoreKeys {
  prepare(): Promise<PreparedKeys | null>;
  locked<T>(work: () => Promise<T>): Promise<T>;
}

/** One rename of the swap, and how to undo it. */
interface Move {
  from: string;
  to: string;
}

/**
 * Renames each of `moves` in order; if one fails, those done are renamed back (newest
 * first) and the error is thrown: all of them or none. Renames inside one file system (all
 * these are inside DATA_DIR) replace nothing and either happen or not.
 */
export function renameAll(moves: readonly Move[], rename: (from: string, to: string) => void = fs.renameSync): void {
  const done: Move[] = [];
  try {
    for (const m of moves) {
      rename(m.from, m.to);
      done.push(m);
    }
  } catch (e) {
    for (const m of done.reverse()) {
      try {
        rename(m.to, m.from);
      } catch (undo) {
        throw new BackupError(`restore failed (${(e as Error).message}) and could not put ${m.from} back (${(undo as Error).message}): it is at ${m.to}`);
      }
    }
    throw new BackupError(`restore failed, nothing was changed: ${(e as Error).message}`);
  }
}

const exists = (p: string) => {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

/**
 * Restores a backup made by backupStore into DATA_DIR, whose server must be stopped (the
 * caller checks, and holds DATA_DIR's mark while this runs). Everything is checked and prepared
 * first, beside the store inside DATA_DIR and before anything there moves: the backup is
 * copied, read whole in a child process (readWhole), and opened, so a file that is not a whole
 * store of this build is refused; its pending reservations are marked held by no process
 * (orphanPending). Then, holding the keys lock (`keys`, or null when the backup has no keys
 * folder), the keys folder is prepared and written out, the current store and keys are moved
 * aside, never deleted, and the copies take their place, all renames or none (renameAll).
 */
export async function restoreStore(dataDir: string, keysDir: string, file: string, at: Date, open: (dir: string) => Store, restoreKeys: RestoreKeys | null = null): Promise<RestoreResult> {
  const source = path.resolve(file);
  if (!fs.existsSync(source) || !fs.statSync(source).isFile()) throw new BackupError(`${source} is not a file`);
  // LMDB would make a new, empty store of an empty file: only an LMDB data file is taken
  if (!isLmdbDataFile(source)) throw new BackupError(`${source} is not an LMDB store (a file written by backup)`);
  const storeDir = path.join(dataDir, 'store');
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // the copies of restores killed mid-way (the caller holds the mark: none runs now)
  const leftovers = removeKilledRestores(dataDir);
  // laid out as a DATA_DIR of its own, so the store is opened by the same code as ever
  const scratch = restoreScratch(dataDir);
  const copied = path.join(scratch, 'store');
  fs.mkdirSync(copied, { recursive: true, mode: 0o700 });
  let records = 0;
  let orphaned = 0;
  try {
    // off the event loop: a large store takes minutes, during which the mark this restore
    // holds is refreshed (lifecycle.ts markRunning)
    await fs.promises.copyFile(source, path.join(copied, 'data.mdb'));
    fs.chmodSync(path.join(copied, 'data.mdb'), 0o600);
    const read = await readWhole(copied);
    if ('why' in read) throw new BackupError(`${source} is not a whole, readable store: ${read.why}`);
    records = read.records;
    let copy: Store;
    try {
      copy = open(scratch);
    } catch (e) {
      throw new BackupError(`${source} is not a store this build can open: ${(e as Error).message}`);
    }
    try {
      orphaned = orphanPending(copy);
    } finally {
      await copy.close();
    }
    fs.rmSync(path.join(copied, 'lock.mdb'), { force: true });
    const swap = async (keys: PreparedKeys | null): Promise<RestoreResult> => {
      const newKeys = path.join(scratch, 'keys');
      if (keys) {
        fs.mkdirSync(newKeys, { mode: 0o700 });
        // 'wx': a name never opens anything that is already there (nothing is, in a fresh folder)
        for (const [name, text] of keys.files) fs.writeFileSync(path.join(newKeys, name), text, { mode: 0o600, flag: 'wx' });
      }
      const stamp = at.toISOString().replace(/[:.]/g, '-');
      const moves: Move[] = [];
      const previous = exists(storeDir) ? `${storeDir}.before-restore-${stamp}` : null;
      if (previous) moves.push({ from: storeDir, to: previous });
      moves.push({ from: copied, to: storeDir });
      const previousKeys = keys && exists(keysDir) ? `${keysDir}.before-restore-${stamp}` : null;
      if (keys) {
        if (previousKeys) moves.push({ from: keysDir, to: previousKeys });
        moves.push({ from: newKeys, to: keysDir });
      }
      // a name a move goes to is free, or moved away by an earlier one (the store, the keys)
      for (const [i, m] of moves.entries()) {
        if (exists(m.to) && !moves.slice(0, i).some((e) => e.from === m.to)) throw new BackupError(`${m.to} exists; restore never replaces it (run it again a moment later)`);
      }
      renameAll(moves);
      const keysResult: RestoreResult['keys'] = keys
        ? { restored_from: keys.from, previous_keys: previousKeys, ...keys.report }
        : { restored_from: null, note: `no ${keysBeside(source)} beside the backup: ${keysDir} is left as it is; verdicts signed by keys not in it will not verify against this server's JWKS` };
      return { restored: source, store: storeDir, previous_store: previous, records_read: records, in_flight_released: orphaned, keys: keysResult, ...(leftovers.length > 0 ? { leftovers_removed: leftovers } : {}) };
    };
    return await (restoreKeys ? restoreKeys.locked(async () => swap(await restoreKeys.prepare())) : swap(null));
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Where backup puts the keys beside a backup file. */
export function keysBesideBackup(file: string): string {
  return keysBeside(path.resolve(file));
}
