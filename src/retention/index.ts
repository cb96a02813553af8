import { now } from '../clock.ts';
import type { Config } from '../config/index.ts';
import type { Logger } from '../observability/index.ts';
import { keySourceFor } from '../signing/index.ts';
import type { Retention, SigningKeys, StoreStatus } from '../store/index.ts';
import { pruneArchiveBefore } from './archive.ts';
import { periodic } from './periodic.ts';

export { periodic, type Periodic } from './periodic.ts';

const DAY_MS = 86_400_000;

export type RetentionConfig = Pick<Config, 'DATA_DIR' | 'RETENTION_AUDIT_DAYS' | 'RETENTION_RESULTS_DAYS' | 'RETENTION_LEDGER_DAYS' | 'RETENTION_ARCHIVE_DAYS'>;

export interface PruneReport {
  at: string;
  /** records removed per kind; null where the kind is kept for ever (setting 0) */
  audit: number | null;
  results: number | null;
  ledger: number | null;
  /** archived requests (folders) removed with their day */
  archive: number | null;
  /** device sessions expired longer ago than the results retention: their results are gone */
  sessions: number | null;
  /** verdict-signing keys retired 30 days ago or more (RETIRED_DELETE_MS, not a setting): key
   * files with LMDB, rows with PostgreSQL; a revoked key's record is kept */
  signing_keys: number;
}

/** What a pass uses of the store: its retention, and where its signing keys live. */
export type PrunedStore = Retention & Pick<StoreStatus, 'kind'> & SigningKeys;

/** One pass over every kind with its own period; the same in the service and the CLI. */
export async function pruneOnce(backend: PrunedStore, config: RetentionConfig, at = now()): Promise<PruneReport> {
  const cutoff = (days: number) => at - days * DAY_MS;
  const run = async (days: number, fn: (cutoff: number) => Promise<number>) => (days > 0 ? fn(cutoff(days)) : null);
  return {
    at: new Date(at).toISOString(),
    audit: await run(config.RETENTION_AUDIT_DAYS, (c) => backend.pruneAuditBefore(c)),
    results: await run(config.RETENTION_RESULTS_DAYS, (c) => backend.pruneResultsBefore(c)),
    ledger: await run(config.RETENTION_LEDGER_DAYS, (c) => backend.pruneLedgerBefore(c)),
    // the demo archive is files under DATA_DIR on every store (docs/several-nodes.md)
    archive: await run(config.RETENTION_ARCHIVE_DAYS, (c) => pruneArchiveBefore(config.DATA_DIR, c)),
    sessions: await run(config.RETENTION_RESULTS_DAYS, (c) => backend.pruneDeviceSessionsBefore(c)),
    // a retired key's private part was kept until the next rotation, however late that came
    signing_keys: (await keySourceFor(backend, config.DATA_DIR).prune(at)).length,
  };
}

/** The service's pruner: once at start, then hourly, in the main thread only (one pass per
 * process, never one per API worker). Failures are logged and retried at the next tick. */
export function startRetention(store: PrunedStore, config: RetentionConfig, log: Logger, everyMs = 3600_000): () => Promise<void> {
  const job = periodic(async () => {
    try {
      const report = await pruneOnce(store, config);
      if (report.audit || report.results || report.ledger || report.archive || report.sessions || report.signing_keys) log.info({ pruned: report }, 'retention: pruned');
    } catch (err) {
      log.error({ err }, 'retention: prune failed');
    }
  }, everyMs);
  void job.run();
  // stop: no new pass; resolves when a pass under way ends, so the store closes after it
  return job.stop;
}
