import type { StoreBackend } from './backend.ts';
import { LmdbBackend } from './lmdb-backend.ts';
import { PgBackend, type PgOptions } from './pg/backend.ts';

export class DatabaseUrlError extends Error {}

/** DATABASE_URL selects the shared PostgreSQL store; unset (or empty) means LMDB in
 * DATA_DIR. Only postgres:// and postgresql:// URLs are accepted, so a typo fails at start
 * instead of silently falling back to a local store that no other node sees. */
export function databaseUrlFrom(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new DatabaseUrlError('DATABASE_URL must be a URL such as postgres://user:password@host:5432/db');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new DatabaseUrlError(`DATABASE_URL must start with postgres:// or postgresql:// (got ${url.protocol}//)`);
  return raw;
}

/** Opens the configured store: PostgreSQL (migrated under the advisory lock, this process
 * registered as a node with a lease) when a URL is given, else LMDB under `dataDir`. */
export async function openBackend(opts: { databaseUrl: string | undefined; dataDir: string; pg?: PgOptions }): Promise<StoreBackend> {
  return opts.databaseUrl === undefined ? LmdbBackend.open(opts.dataDir) : PgBackend.open(opts.databaseUrl, opts.pg);
}
