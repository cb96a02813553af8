import { pruneOnce } from '../retention/index.ts';
import { markRunning, ServerRunningError } from '../lifecycle.ts';
import fs from 'node:fs';
import path from 'node:path';
import { now } from '../clock.ts';
import { KeyFolderError, keysDir, keysForRestore, withKeysLock } from '../signing/index.ts';
import { BackupError, backupStore, keysBesideBackup, restoreStore, openStore, type PreparedKeys, type RestoreKeys } from '../store/lmdb/index.ts';
import { ConflictError, UsageError } from './errors.ts';
import { operatorPath, type Command } from './command.ts';

/** The backup's keys folder checked (no links, key files only, each a valid key) and merged
 * with the revocations of DATA_DIR's keys, before anything in DATA_DIR moves; null when the
 * backup has no keys folder (restore then leaves DATA_DIR/keys as it is). */
async function preparedKeys(file: string, liveKeys: string): Promise<PreparedKeys | null> {
  const saved = keysBesideBackup(file);
  try {
    fs.lstatSync(saved);
  } catch {
    return null;
  }
  try {
    const r = await keysForRestore(saved, liveKeys, now());
    return { from: saved, files: r.files, report: { current: r.current, current_from: r.current_from, kept_revocations: r.kept_revocations } };
  } catch (e) {
    if (e instanceof KeyFolderError) throw new UsageError(`${e.message}; nothing was restored`);
    throw e;
  }
}

/** Operations commands: retention and backup (docs/operations.md: "Retention", "Backup and restore"). */
export const opsCommands: Record<string, Command> = {
  'retention prune': {
    positional: 0,
    existingStore: true,
    usage: 'retention prune   (one pass of the pruner with the RETENTION_* settings, as the service runs hourly)',
    run: async (store, _args, ctx) => pruneOnce(store, ctx.config),
  },
  backup: {
    existingStore: true,
    usage: 'backup <file>   (consistent compacted copy of the LMDB store, and the signing keys in <file>.keys/; safe while the service runs)',
    async run(store, [file, ...rest], ctx) {
      if (!file || rest.length > 0) throw new UsageError('backup takes one argument: the file to write');
      try {
        return await backupStore(store, operatorPath(ctx, file), keysDir(ctx.config.DATA_DIR));
      } catch (e) {
        if (e instanceof BackupError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
  restore: {
    usage: 'restore <file>   (a backup, and its <file>.keys/, into DATA_DIR; the server on it must be stopped; what was there is moved aside, never deleted)',
    noStore: true,
    async run(_store, [given, ...rest], ctx) {
      if (!given || rest.length > 0) throw new UsageError('restore takes one argument: the backup file');
      const { config, stderr } = ctx;
      const file = operatorPath(ctx, given);
      if (config.DATABASE_URL) throw new UsageError('restore puts back an LMDB backup; with DATABASE_URL use pg_restore (docs/operations.md, Backup and restore)');
      // DATA_DIR's server mark, held for the whole restore: a live server refuses it, and a
      // server started meanwhile is refused (it used to start and serve the store this restore
      // then moved aside, and the charges it answered went with it)
      // a file that is not there is refused before the mark makes DATA_DIR
      if (!fs.statSync(file, { throwIfNoEntry: false })?.isFile()) throw new UsageError(`${file} is not a file; nothing was restored`);
      let unmark: () => void;
      try {
        unmark = await markRunning(config.DATA_DIR, 'restore');
      } catch (e) {
        if (e instanceof ServerRunningError) throw new ConflictError(`${e.message}; nothing was restored`);
        throw new UsageError(`DATA_DIR ${config.DATA_DIR} cannot be used: ${(e as Error).message}; nothing was restored`);
      }
      try {
        const live = keysDir(config.DATA_DIR);
        // read here to refuse a bad keys folder before the copy; read again, with the
        // revocations, holding the keys lock until the folders are swapped (RestoreKeys)
        const keys: RestoreKeys | null = (await preparedKeys(file, live))
          ? { prepare: () => preparedKeys(file, live), locked: (work) => withKeysLock(config.DATA_DIR, work) }
          : null;
        const result = await restoreStore(config.DATA_DIR, live, file, new Date(now()), (dir) => openStore(dir, { mapGiB: config.LMDB_MAP_SIZE_GIB }), keys);
        if (result.keys.restored_from === null) stderr.write(`WARNING: ${result.keys.note}\n`);
        const report = result.keys as Record<string, unknown>;
        const kept = (report.kept_revocations ?? []) as string[];
        if (kept.length > 0) stderr.write(`kept revoked (revoked after this backup was taken): ${kept.join(', ')}\n`);
        if (report.current_from === 'data_dir') stderr.write(`the backup's signing key was revoked since: ${String(report.current)} (the key that replaced it) signs\n`);
        if (report.current_from === 'new') stderr.write(`the backup's signing key was revoked since: a new key ${String(report.current)} signs\n`);
        stderr.write('next: start the service, then npm run cli -- ledger verify\n');
        return result;
      } catch (e) {
        if (e instanceof BackupError) throw new UsageError(e.message);
        throw e;
      } finally {
        unmark();
      }
    },
  },
};
