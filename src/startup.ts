import type { Config } from './config/index.ts';
import type { Logger } from './observability/logger.ts';
import type { Store } from './store/open.ts';

/** Work done once per process before serving (crash recovery of pending metering records
 * lands here with the metering issue). */
export async function startupHooks(_store: Store, _config: Config, _log: Logger): Promise<void> {}
