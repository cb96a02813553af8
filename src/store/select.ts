import type { StoreBackend } from './backend.ts';
import { injectSettlementFault, settlementFaultFor } from './faults.ts';
import { LmdbBackend } from './lmdb-backend.ts';
import type { LmdbCommits } from './open.ts';
import type { PgOptions } from './pg/backend.ts';

/** Opens the configured store: PostgreSQL (migrated under the advisory lock, this process
 * registered as a node with a lease) when a URL is given, else LMDB under `dataDir`. */
export async function openBackend(opts: { databaseUrl: string | undefined; dataDir: string; pg?: PgOptions; lmdbCommits?: LmdbCommits }): Promise<StoreBackend> {
  if (opts.databaseUrl === undefined) return LmdbBackend.open(opts.dataDir, { commits: opts.lmdbCommits });
  // loaded only when configured: a thread of an LMDB service does not carry the pg client
  const { PgBackend } = await import('./pg/backend.ts');
  return PgBackend.open(opts.databaseUrl, opts.pg);
}

type StoreConfig = { DATABASE_URL?: string | undefined; DATA_DIR: string; NODE_LEASE_SECONDS: number; LMDB_COMMITS?: LmdbCommits; TEST_SETTLEMENT_FAIL_PREFIX?: string | undefined };

/** The store a process of the service uses, from its validated configuration. */
export async function openConfiguredStore(config: StoreConfig, onError?: (err: Error) => void): Promise<StoreBackend> {
  const store = await openBackend({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, lmdbCommits: config.LMDB_COMMITS, pg: { leaseMs: config.NODE_LEASE_SECONDS * 1000, ...(onError ? { onError } : {}) } });
  injectSettlementFault(store, settlementFaultFor(config.TEST_SETTLEMENT_FAIL_PREFIX));
  return store;
}
