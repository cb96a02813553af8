import { now } from './clock.ts';
import type { Config } from './config/index.ts';
import type { Logger } from './observability/index.ts';
import { keySourceFor } from './signing/index.ts';
import type { Recovery, Retention, SigningKeys, StoreStatus } from './store/index.ts';

/** What the start-up hooks use of the store. */
type StartupStore = Pick<StoreStatus, 'kind'> & SigningKeys & Pick<Recovery, 'recoverPending'> & Pick<Retention, 'pruneIdempotency'>;

/** Refunds what dead holders left pending, logging each (the holder as holder_pid or
 * holder_node: pino's own `pid` names the process that logs the line). */
async function recover(store: Pick<Recovery, 'recoverPending'>, log: Logger, onRefund: (module: string, units: number) => void): Promise<number> {
  const recovered = await store.recoverPending(now());
  for (const r of recovered) {
    onRefund(r.module_id, r.units);
    log.warn(
      { reservation: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, ...(r.node ? { holder_node: r.node } : { holder_pid: r.pid, holder_pid_start: r.pid_start ?? null }) },
      'crash recovery: pending reservation refunded, idempotency key released',
    );
  }
  return recovered.length;
}

/** Once per process, before serving: create the verdict signing key on first start (in
 * DATA_DIR, or in the database with PostgreSQL), settle what a crashed predecessor left
 * pending; then prune expired idempotency records, beside serving, and hourly. With the shared
 * PostgreSQL store every node also sweeps, every half lease, the reservations of nodes whose
 * lease expired (SKIP LOCKED: sweepers never queue). Resolves with the first prune, for the
 * tests that await it. */
export async function startupHooks(store: StartupStore, config: Config, log: Logger, onRefund: (module: string, units: number) => void = () => {}): Promise<{ firstPrune: Promise<void> }> {
  await keySourceFor(store, config.DATA_DIR).current(now());
  const recovered = await recover(store, log, onRefund);
  if (recovered > 0) log.warn({ recovered }, 'crash recovery finished');
  if (store.kind === 'postgres') {
    setInterval(() => void recover(store, log, onRefund).catch((err) => log.warn({ err: { message: (err as Error).message } }, 'lease sweep failed')), (config.NODE_LEASE_SECONDS * 1000) / 2).unref();
  }
  // one pass at a time: a first pass that indexes a large store may outlast the hour
  let running: Promise<void> | null = null;
  const prune = () => {
    running ??= store.pruneIdempotency(now(), config.IDEMPOTENCY_RETENTION_HOURS).then(
      (pruned) => {
        if (pruned > 0) log.info({ pruned }, 'pruned completed idempotency records');
      },
      (err: unknown) => log.error({ err }, 'idempotency prune failed'),
    ).finally(() => {
      running = null;
    });
    return running;
  };
  // Not awaited: a record past its retention may be replayed a little longer (the retention is
  // a minimum), and the first pass over an LMDB store written before the expiry index reads
  // and indexes every key (src/store/lmdb/expiry.ts), minutes for millions of them, which must
  // neither hold the start nor run into START_TIMEOUT_SECONDS.
  const firstPrune = prune();
  setInterval(() => void prune(), 3600_000).unref();
  return { firstPrune };
}
