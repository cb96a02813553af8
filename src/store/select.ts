import type { MessagePort } from 'node:worker_threads';
import type { StoreBackend } from './backend.ts';
import { injectSettlementFault, settlementFaultFor } from './faults.ts';
import { LmdbBackend, meteringWriterChannel } from './lmdb/index.ts';
import type { LmdbCommits } from './lmdb/open.ts';
import type { WriterClient } from './lmdb/writer-client.ts';
import type { PgOptions } from './pg/index.ts';

/** Opens the configured store: PostgreSQL (migrated under the advisory lock, this process
 * registered as a node with a lease) when a URL is given, else LMDB under `dataDir`. */
export async function openBackend(opts: { databaseUrl: string | undefined; dataDir: string; pg?: PgOptions; lmdbCommits?: LmdbCommits; lmdbStallMs?: number; lmdbMapGiB?: number; lmdbWriter?: WriterClient }): Promise<StoreBackend> {
  if (opts.databaseUrl === undefined) return LmdbBackend.open(opts.dataDir, { commits: opts.lmdbCommits, stallMs: opts.lmdbStallMs, mapGiB: opts.lmdbMapGiB, ...(opts.lmdbWriter ? { writer: opts.lmdbWriter } : {}) });
  // loaded only when configured: a thread of an LMDB service does not carry the pg client
  const { PgBackend } = await import('./pg/index.ts');
  return PgBackend.open(opts.databaseUrl, opts.pg);
}

type StoreConfig = {
  DATABASE_URL?: string | undefined;
  DATA_DIR: string;
  NODE_LEASE_SECONDS: number;
  WORKERS: number;
  DATABASE_POOL_SIZE: number;
  LMDB_COMMITS?: LmdbCommits;
  STORE_STALL_SECONDS?: number;
  LMDB_MAP_SIZE_GIB?: number;
  TEST_SETTLEMENT_FAIL_PREFIX?: string | undefined;
  TEST_SETTLEMENT_HOLD_PREFIX?: string | undefined;
};

/** Connections per thread: every thread of a node (the main thread and each API worker) has
 * a pool of its own, so the node's DATABASE_POOL_SIZE is shared out over WORKERS + 1, at least
 * one each. A fixed 4 per thread made a 4-core node (32 API workers) open 132, more than a
 * default PostgreSQL (max_connections 100) gives a few nodes. An API worker's two verify slots
 * run one short transaction at a time each, so one or two connections keep up. */
export function poolSizePerThread(config: Pick<StoreConfig, 'WORKERS' | 'DATABASE_POOL_SIZE'>): number {
  return Math.min(4, Math.max(1, Math.floor(config.DATABASE_POOL_SIZE / (config.WORKERS + 1))));
}

/** What the PostgreSQL store tells the log besides connection errors: an outage (no writable
 * host) and the recovery that ends it, with how long it lasted (src/store/pg/hosts.ts). */
export interface StoreLog {
  warn(obj: object, msg: string): void;
}

/** The store a process of the service uses, from its validated configuration. `lmdbWriter`:
 * a channel to the process's LMDB metering writer given directly, for an API worker's store
 * opened on a thread that has no workerData naming one (the tests' in-process API); an API
 * worker of the service finds its channel in its workerData (writer-client.ts). `pgOpen.existing`:
 * a PostgreSQL database without the service's schema is refused, not set up (the CLI's reading
 * commands; LMDB's counterpart is the CLI's own check of DATA_DIR). */
export async function openConfiguredStore(config: StoreConfig, onError?: (err: Error) => void, log?: StoreLog, lmdbWriter?: WriterClient, pgOpen: Pick<PgOptions, 'existing'> = {}): Promise<StoreBackend> {
  const events: PgOptions = log
    ? {
      onDown: (reason) => log.warn({ reason }, 'store has no writable host: verify calls answer 503 store_unavailable until one answers'),
      onRecovered: (r) => log.warn({ outage_s: Math.round(r.seconds * 1000) / 1000, host: r.host, previous: r.previous, reason: r.reason }, 'store recovered'),
      onLostCommit: (l) => log.warn(l, l.outcome === 'restored'
        ? 'a settlement answered before the outage was missing from the database (asynchronous replication?): put back with the answer given'
        : 'a settlement answered before the outage was missing from the database (asynchronous replication?) and is no longer remembered: refunded, its key freed'),
      onSettlementResolved: (r) => log.warn(r, `settlement of unknown outcome resolved: ${r.outcome}${r.already ? ' (it had committed before the connection broke)' : ''}`),
    }
    : {};
  const store = await openBackend({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, lmdbCommits: config.LMDB_COMMITS, lmdbStallMs: config.STORE_STALL_SECONDS === undefined ? undefined : config.STORE_STALL_SECONDS * 1000, lmdbMapGiB: config.LMDB_MAP_SIZE_GIB, ...(lmdbWriter ? { lmdbWriter } : {}), pg: { leaseMs: config.NODE_LEASE_SECONDS * 1000, poolSize: poolSizePerThread(config), ...(onError ? { onError } : {}), ...events, ...pgOpen } });
  injectSettlementFault(store, settlementFaultFor(config.TEST_SETTLEMENT_FAIL_PREFIX, config.TEST_SETTLEMENT_HOLD_PREFIX));
  return store;
}

/** For an API worker about to start: its channel to the process's LMDB metering writer
 * (src/store/lmdb/writer.ts), to put in its workerData as `lmdbWriter` and transfer; null on
 * PostgreSQL and with LMDB_COMMITS=batched. The main thread's store starts the writer on the
 * first call and ends it when it closes. */
export function storeWriterChannel(store: StoreBackend): { port: MessagePort; storeDir: string } | null {
  return store instanceof LmdbBackend ? meteringWriterChannel(store) : null;
}
