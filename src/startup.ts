import { now } from './clock.ts';
import type { Config } from './config/index.ts';
import { pruneIdempotency, recoverPending } from './metering/index.ts';
import type { Logger } from './observability/logger.ts';
import { ensureSigningKey } from './signing/index.ts';
import type { Store } from './store/open.ts';

/** Once per process, before serving: create the verdict signing key on first start, settle what a crashed predecessor left pending, prune
 * expired idempotency records, and keep pruning hourly. */
export async function startupHooks(store: Store, config: Config, log: Logger): Promise<void> {
  await ensureSigningKey(config.DATA_DIR, now());
  const recovered = await recoverPending(store, now(), log);
  if (recovered > 0) log.warn({ recovered }, 'crash recovery finished');
  const prune = async () => {
    const pruned = await pruneIdempotency(store, now(), config.IDEMPOTENCY_RETENTION_HOURS);
    if (pruned > 0) log.info({ pruned }, 'pruned completed idempotency records');
  };
  await prune();
  setInterval(() => void prune().catch((err) => log.error({ err }, 'idempotency prune failed')), 3600_000).unref();
}
