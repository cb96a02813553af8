import { hashPassword } from '../auth/password.ts';
import { isoNow } from '../clock.ts';
import type { Config } from '../config/index.ts';
import type { Logger } from '../observability/logger.ts';
import type { Store } from '../store/open.ts';
import { createUser, DuplicateUserError, getUserByName } from '../store/users.ts';

/** contract.md: ADMIN_USERNAME/ADMIN_PASSWORD create that admin if the name is free; an
 * existing user is never overwritten (so a leaked env var cannot reset a password). */
export async function bootstrapAdmin(store: Store, config: Config, log: Logger): Promise<void> {
  const { ADMIN_USERNAME: username, ADMIN_PASSWORD: password } = config;
  if (!username || !password) return;
  if (getUserByName(store, username)) {
    log.info({ username }, 'admin bootstrap: user exists, left unchanged');
    return;
  }
  try {
    await createUser(store, { username, role: 'admin', password_hash: await hashPassword(password), created_at: isoNow() });
    log.info({ username }, 'admin bootstrap: admin user created');
  } catch (e) {
    if (!(e instanceof DuplicateUserError)) throw e;
  }
}
