import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { StoreBackend } from './backend.ts';
import { embeddedStore } from './lmdb-backend.ts';

export class BackupError extends Error {}

/**
 * A consistent copy of the live LMDB store in one file, made while the service runs:
 * mdb_env_copy2 with MDB_CP_COMPACT reads one snapshot (a read transaction, so writers go
 * on) and writes only live pages. LMDB writes `data.mdb` into a directory, so the copy is
 * made in a scratch directory beside the target and renamed into place: an interrupted
 * backup never leaves a partial file under the requested name. An existing file is never
 * overwritten.
 */
export async function backupStore(backend: StoreBackend, file: string): Promise<{ file: string; bytes: number }> {
  const store = embeddedStore(backend);
  // PostgreSQL has its own consistent dump (README, Backup and restore)
  if (!store) throw new BackupError('backup copies the LMDB store; with DATABASE_URL use pg_dump (README, Backup and restore)');
  const target = path.resolve(file);
  if (fs.existsSync(target)) throw new BackupError(`${target} exists; a backup never overwrites a file`);
  const scratch = path.join(path.dirname(target), `.${path.basename(target)}.partial-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(scratch, { recursive: true, mode: 0o700 });
  try {
    await store.root.backup(scratch, true);
    const copy = path.join(scratch, 'data.mdb');
    fs.chmodSync(copy, 0o600);
    // link + unlink rather than rename: link fails if the target appeared meanwhile
    fs.linkSync(copy, target);
    return { file: target, bytes: fs.statSync(target).size };
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
