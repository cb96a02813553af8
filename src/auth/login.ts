import type { Config } from '../config/index.ts';
import { bodyParser } from '../packets/json-body.ts';
import { ServiceError } from '../errors/index.ts';
import type { StoreBackend } from '../store/backend.ts';
import { verifyPassword } from './password.ts';
import { LoginSchema } from './schemas.ts';
import { createSession, sweepSessions } from './session.ts';
import { throttleWait } from '../store/throttle-rules.ts';
import type { SessionRecord } from './session.ts';

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

/** contract.md "Authentication and sessions". The order matters: the throttle is checked before
 * the password (so guessing stops; rules in throttle-rules.ts), the password is always verified (a dummy hash for an
 * unknown name, the real one for a disabled account) so every wrong answer costs the same
 * time, and the role is revealed only to someone who knows the password. */
export async function login(store: StoreBackend, config: Config, input: { username: string; password: string }, address: string, at: number): Promise<{ id: string; session: SessionRecord }> {
  const wait = throttleWait(await store.readThrottle(address, input.username, at), at);
  if (wait > 0) throw new ServiceError('too_many_attempts', undefined, { 'Retry-After': String(wait) });
  const user = await store.getUserByName(input.username);
  const ok = await verifyPassword(input.password, user?.password_hash);
  if (!ok || !user || !user.enabled) {
    await store.recordLoginFailure(address, input.username, at);
    throw new ServiceError('invalid_credentials');
  }
  await store.recordLoginSuccess(address, input.username, at);
  if (user.role !== 'admin') throw new ServiceError('login_disabled');
  await sweepSessions(store, config, at);
  await store.sweepLoginThrottle(at);
  return createSession(store, config, user, at);
}
