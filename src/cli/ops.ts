import { loadConfig } from '../config/index.ts';
import { pruneOnce } from '../retention/index.ts';
import { runningServer } from '../lifecycle.ts';
import { keysDir } from '../signing/index.ts';
import { BackupError, backupStore, restoreStore, openStore } from '../store/index.ts';
import { ConflictError, UsageError } from './errors.ts';
import type { Command } from './command.ts';

/** Operations commands: retention and backup (docs/operations.md: "Retention", "Backup and restore"). */
export const opsCommands: Record<string, Command> = {
  'retention prune': {
    usage: 'retention prune   (one pass of the pruner with the RETENTION_* settings, as the service runs hourly)',
    run: async (store) => pruneOnce(store, loadConfig()),
  },
  backup: {
    usage: 'backup <file>   (consistent compacted copy of the LMDB store, and the signing keys in <file>.keys/; safe while the service runs)',
    async run(store, [file, ...rest]) {
      if (!file || rest.length > 0) throw new UsageError('backup takes one argument: the file to write');
      try {
        return await backupStore(store, file, keysDir(loadConfig().DATA_DIR));
      } catch (e) {
        if (e instanceof BackupError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
  restore: {
    usage: 'restore <file>   (a backup, and its <file>.keys/, into DATA_DIR; the server on it must be stopped; what was there is moved aside, never deleted)',
    noStore: true,
    async run(_store, [file, ...rest]) {
      if (!file || rest.length > 0) throw new UsageError('restore takes one argument: the backup file');
      const config = loadConfig();
      if (config.DATABASE_URL) throw new UsageError('restore puts back an LMDB backup; with DATABASE_URL use pg_restore (docs/operations.md, Backup and restore)');
      const running = runningServer(config.DATA_DIR);
      if (running) throw new ConflictError(`a server (pid ${running.pid}, started ${running.started_at}) is running on ${config.DATA_DIR}: stop it first`);
      try {
        const result = await restoreStore(config.DATA_DIR, keysDir(config.DATA_DIR), file, new Date(), (dir) => openStore(dir));
        if (result.keys.restored_from === null) process.stderr.write(`WARNING: ${result.keys.note}\n`);
        process.stderr.write('next: start the service, then npm run cli -- ledger verify\n');
        return result;
      } catch (e) {
        if (e instanceof BackupError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
};
