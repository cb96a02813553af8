import { SCHEMA_VERSION, type LmdbBackend } from '../store/lmdb/index.ts';
import type { PgBackend } from '../store/pg/index.ts';
import type { Command } from './command.ts';

export const dbCommands: Record<string, Command> = {
  'db migrate': {
    positional: 0,
    usage: 'db migrate   (PostgreSQL when DATABASE_URL is set: applies pending schema migrations under the advisory lock; LMDB: creates or checks the store, and has the pruners index it again)',
    // Opening the store is the migration: the CLI opened it (under the advisory lock for
    // PostgreSQL, checked against this build's layout for LMDB) before running this. On LMDB,
    // a build older than the expiry index may have written the store (a roll-back, then this
    // build again): its records have no entries, and would outlive their retention, so the
    // next pass of each pruner reads its tree once and indexes them (store/lmdb/expiry.ts).
    async run(store) {
      if (store.kind === 'lmdb') return { store: 'lmdb', schema_version: SCHEMA_VERSION, applied: [], reindex_at_next_prune: await (store as LmdbBackend).forgetExpiryIndex() };
      // loaded here, not at the top: an LMDB CLI does not carry the pg client (the store is open, so it is loaded already)
      const { MIGRATIONS } = await import('../store/pg/index.ts');
      return { store: 'postgres', schema_version: MIGRATIONS[MIGRATIONS.length - 1]!.version, applied: (store as PgBackend).applied };
    },
  },
};
