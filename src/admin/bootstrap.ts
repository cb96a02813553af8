import { hashPassword } from '../auth/index.ts';
import { isoNow } from '../clock.ts';
import type { Config } from '../config/index.ts';
import type { Logger } from '../observability/index.ts';
import { type UserAccounts, DuplicateUserError } from '../store/index.ts';
import { addUser } from './users.ts';

/** contract.md: ADMIN_USERNAME/ADMIN_PASSWORD create that admin if the name is free; an
 * existing user is never overwritten (so a leaked env var cannot reset a password). */
export async function bootstrapAdmin(store: UserAccounts, config: Config, log: Logger): Promise<void> {
  const { ADMIN_USERNAME: username, ADMIN_PASSWORD: password } = config;
  if (!username || !password) return;
  if (await store.getUserByName(username)) {
    log.info({ username }, 'admin bootstrap: user exists, left unchanged');
    return;
  }
  try {
    await addUser(store, { username, password, role: 'admin' });
    log.info({ username }, 'admin bootstrap: admin user created');
  } catch (e) {
    if (!(e instanceof DuplicateUserError)) throw e;
  }
}
