import pg from 'pg';
import { SCHEMA_VERSION } from '../store/open.ts';
import { migrate } from '../store/pg/migrate.ts';
import { MIGRATIONS } from '../store/pg/migrations.ts';
import { databaseUrlFrom, DatabaseUrlError } from '../store/select.ts';
import { UsageError } from './errors.ts';
import type { Command } from './main.ts';

export const dbCommands: Record<string, Command> = {
  'db migrate': {
    usage: 'db migrate   (PostgreSQL when DATABASE_URL is set: applies pending schema migrations under the advisory lock; LMDB: creates or checks the store)',
    async run() {
      let url: string | undefined;
      try {
        url = databaseUrlFrom();
      } catch (e) {
        if (e instanceof DatabaseUrlError) throw new UsageError(e.message);
        throw e;
      }
      // the LMDB store was opened (created or checked against this build) by the CLI itself
      if (url === undefined) return { store: 'lmdb', schema_version: SCHEMA_VERSION, applied: [] };
      const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 10_000 });
      pool.on('error', () => {});
      try {
        const applied = await migrate(pool);
        return { store: 'postgres', schema_version: MIGRATIONS[MIGRATIONS.length - 1]!.version, applied };
      } finally {
        await pool.end();
      }
    },
  },
};
