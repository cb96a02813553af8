import type { Config } from '../config/index.ts';
import { describeUwsBuild, uwsBuild } from '../http/index.ts';
import type { Logger } from '../observability/index.ts';
import type { StoreBackend } from '../store/index.ts';

/** The one line an operator starting the service by hand reads: where it serves, where the
 * console is, and how to get into it when nobody can yet. */
export async function announceListening(log: Logger, config: Config, port: number, store: StoreBackend): Promise<void> {
  const scheme = config.TLS_CERT_FILE ? 'https' : 'http';
  const shown = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  const url = `${scheme}://${shown}:${port}`;
  const noAdmin = !(await store.listUsers().catch(() => [])).some((u) => u.role === 'admin' && u.enabled);
  log.info(
    {
      host: config.HOST, port, workers: config.WORKERS, verify_slots: config.VERIFY_SLOTS, tls: Boolean(config.TLS_CERT_FILE), url, console_url: `${url}/admin`,
      // which HTTP build serves, and why a newer one did not (docs/platforms.md)
      node: process.version, uws: describeUwsBuild(),
      ...(uwsBuild()?.skipped.length ? { uws_skipped: uwsBuild()!.skipped } : {}),
      ...(noAdmin ? { first_admin: 'no administrator yet: npm run cli -- user create <name> --role admin (password on stdin), or start with ADMIN_USERNAME and ADMIN_PASSWORD' } : {}),
    },
    'listening',
  );
}
