import { loadConfig } from '../config/index.ts';
import { pruneOnce } from '../retention/index.ts';
import { BackupError, backupStore } from '../store/backup.ts';
import { UsageError } from './errors.ts';
import type { Command } from './command.ts';

/** Operations commands: retention and backup (README "Retention", "Backup and restore"). */
export const opsCommands: Record<string, Command> = {
  'retention prune': {
    usage: 'retention prune   (one pass of the pruner with the RETENTION_* settings, as the service runs hourly)',
    run: async (store) => pruneOnce(store, loadConfig()),
  },
  backup: {
    usage: 'backup <file>   (consistent compacted copy of the LMDB store; safe while the service runs)',
    async run(store, [file, ...rest]) {
      if (!file || rest.length > 0) throw new UsageError('backup takes one argument: the file to write');
      try {
        return await backupStore(store, file);
      } catch (e) {
        if (e instanceof BackupError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
};
