import type { Config } from '../config/index.ts';
import { bodyParser } from '../packets/index.ts';
import { retryAfter, ServiceError } from '../errors/index.ts';
import type { AdminSessions, LoginThrottle, UserAccounts, UserRecord } from '../store/index.ts';
import { hashPassword, needsRehash, verifyPassword } from './password.ts';
import { LoginSchema } from './schemas.ts';
import { createSession, sweepSessions, type SessionRecord } from './session.ts';

export interface SessionBody {
  username: string;
  role: SessionRecord['role'];
  csrf_token: string;
  expires_at: string;
}

export function sessionBody(s: SessionRecord): SessionBody {
  return { username: s.username, role: s.role, csrf_token: s.csrf_token, expires_at: new Date(s.expires_at).toISOString() };
}

export const parseLogin = bodyParser(LoginSchema);

/** Checks `password` for the user named `username` under the login throttle (rules in
 * store/throttle-rules.ts), for a login and for any other check of an operator's password.
 * `address` is the throttle's key for the client: its network (an IPv6 /64), which the HTTP
 * layer computes as capacity does.
 *  - the attempt is counted BEFORE the password is checked, in one store transaction with
 *    the throttle's decision, so concurrent guesses see each other and those past the limit
 *    are refused 429 too_many_attempts with Retry-After, their passwords never hashed;
 *  - the password is always verified (a dummy hash for an unknown name, the real one for a
 *    disabled account) so every wrong answer costs the same time;
 *  - right: the success clears what the rules say and gives the address count back; wrong:
 *    the reservation stays as the failure; never checked (503 from the hash gate, a store
 *    failure): the reservation is given back.
 * Returns the user for a right password of an enabled account, else undefined. */
export async function checkPasswordThrottled(store: LoginThrottle & Pick<UserAccounts, 'getUserByName'>, username: string, password: string, address: string, at: number): Promise<UserRecord | undefined> {
  const { wait, known } = await store.reserveLoginAttempt(address, username, at);
  if (wait > 0) throw new ServiceError('too_many_attempts', undefined, retryAfter(wait));
  let user: UserRecord | undefined;
  let ok: boolean;
  try {
    user = await store.getUserByName(username);
    // an address the name logged in from is hashed first: a flood cannot keep its operator out
    // and each network holds one place in the ordinary lane: a flood from many addresses
    // leaves room for an operator at a new one (hash-gate.ts)
    ok = await verifyPassword(password, user?.password_hash, known, address);
  } catch (err) {
    // the answer is the original error; a failed give-back only leaves one count too many
    await store.releaseLoginAttempt(address, username, at).catch(() => undefined);
    throw err;
  }
  if (!ok || !user || !user.enabled) return undefined;
  await store.recordLoginSuccess(address, username, at, { reservedAt: at });
  return user;
}

/** Internal control flow, never answered: the stored hash changed while this login's hash was
 * computed, so the rehash is skipped (the login itself stands). */
class HashChanged extends Error {}

/** A hash stored with older parameters is rewritten with the current ones now that the
 * password is known, unless the password was changed meanwhile (that newer hash stays). A
 * failure here must not fail the login: the old hash still verifies, the next login retries. */
async function rehashIfOld(store: Pick<UserAccounts, 'updateUser'>, user: UserRecord, password: string): Promise<void> {
  if (!needsRehash(user.password_hash)) return;
  try {
    const password_hash = await hashPassword(password);
    await store.updateUser(user.id, { password_hash }, (before) => {
      if (before.password_hash !== user.password_hash) throw new HashChanged();
    });
  } catch {
    // see above: the login goes on with the old hash in place
  }
}

/** contract.md "Authentication and sessions". The throttle and the password check are
 * checkPasswordThrottled's; the role is revealed only to someone who knows the password. */
export async function login(store: LoginThrottle & Pick<UserAccounts, 'getUserByName' | 'updateUser'> & AdminSessions, config: Config, input: { username: string; password: string }, address: string, at: number): Promise<{ id: string; session: SessionRecord }> {
  const user = await checkPasswordThrottled(store, input.username, input.password, address, at);
  if (!user) throw new ServiceError('invalid_credentials');
  await rehashIfOld(store, user, input.password);
  if (user.role !== 'admin') throw new ServiceError('login_disabled');
  await sweepSessions(store, config, at);
  return createSession(store, config, user, at);
}
