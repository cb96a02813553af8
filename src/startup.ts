import { now } from './clock.ts';
import type { Config } from './config/index.ts';
import type { Logger } from './observability/index.ts';
import { periodic } from './retention/index.ts';
import { keySourceFor } from './signing/index.ts';
import type { LoginThrottle, Recovery, Retention, SigningKeys, StoreStatus } from './store/index.ts';

/** What the start-up hooks use of the store. */
type StartupStore = Pick<StoreStatus, 'kind'> & SigningKeys & Pick<Recovery, 'recoverPending'> & Pick<Retention, 'pruneIdempotency'> & Pick<LoginThrottle, 'sweepLoginThrottle'>;

/** How often a process sweeps the login throttle's stale counts (startupHooks). */
export const THROTTLE_SWEEP_MS = 60_000;

/** What startupHooks leaves running. */
export interface StartupJobs {
  /** the first pass of the idempotency prune (the tests await it) */
  firstPrune: Promise<void>;
  /** a sweep of the login throttle's stale counts now, or the one running */
  sweepThrottle(): Promise<void>;
  /** stops the periodic jobs; resolves when a throttle sweep under way has ended (the store
   * closes after it). The idempotency prune's first pass may index a large store for minutes:
   * it is not waited for, and a stop cuts it short as it would any read. */
  stop(): Promise<void>;
}

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
 * pending; then prune expired idempotency records, beside serving, and hourly, and sweep the
 * login throttle's stale counts every `throttleSweepMs`. With the shared PostgreSQL store every
 * node also sweeps, every half lease, the reservations of nodes whose lease expired (SKIP
 * LOCKED: sweepers never queue), each once it has watched that lease stay expired, unrenewed,
 * for a whole lease (store/pg/recovery.ts): there the start-up pass only begins watching, and
 * the periodic sweep refunds. */
export async function startupHooks(
  store: StartupStore,
  config: Config,
  log: Logger,
  onRefund: (module: string, units: number) => void = () => {},
  throttleSweepMs = THROTTLE_SWEEP_MS,
): Promise<StartupJobs> {
  await keySourceFor(store, config.DATA_DIR).current(now());
  const recovered = await recover(store, log, onRefund);
  if (recovered > 0) log.warn({ recovered }, 'crash recovery finished');
  const leaseSweep =
    store.kind === 'postgres'
      ? periodic(() => recover(store, log, onRefund).then(() => undefined, (err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'lease sweep failed')), (config.NODE_LEASE_SECONDS * 1000) / 2)
      : null;
  // one pass at a time: a first pass that indexes a large store may outlast the hour
  const prune = periodic(
    () =>
      store.pruneIdempotency(now(), config.IDEMPOTENCY_RETENTION_HOURS).then(
        (pruned) => {
          if (pruned > 0) log.info({ pruned }, 'pruned completed idempotency records');
        },
        (err: unknown) => log.error({ err }, 'idempotency prune failed'),
      ),
    3600_000,
  );
  // Not awaited: a record past its retention may be replayed a little longer (the retention is
  // a minimum), and the first pass over an LMDB store written before the expiry index reads
  // and indexes every key (src/store/lmdb/expiry.ts), minutes for millions of them, which must
  // neither hold the start nor run into START_TIMEOUT_SECONDS.
  const firstPrune = prune.run();
  // The login throttle's counts past their time (a spray from an IPv6 /48's 65,536 networks
  // leaves tens of thousands). Swept here, by the process on a clock, rather than by the logins:
  // a sweep reads every count, so one started every so many attempts on each API worker made a
  // spray's cheap refused attempts buy whole-table reads on every worker at once, and one
  // awaited at a login made that login wait for it. A minute apart, the counts stay within their
  // window plus that minute, and a spray costs one pass a minute per process, however fast it
  // comes. The throttle's decisions never depend on a sweep: a stale count reads as none.
  const sweep = periodic(
    () => store.sweepLoginThrottle(now()).catch((err: unknown) => log.warn({ err: { message: (err as Error).message } }, 'login throttle sweep failed; the next one tries again')),
    throttleSweepMs,
  );
  return {
    firstPrune,
    sweepThrottle: sweep.run,
    stop: () => {
      // the prune's and the lease sweep's runs are not waited for (the first prune may index a
      // large store for minutes): only their schedules end
      void prune.stop();
      void leaseSweep?.stop();
      return sweep.stop();
    },
  };
}
