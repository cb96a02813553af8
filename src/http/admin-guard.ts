import { csrfMatches, readSessionCookie, destroySession, findSession, type SessionRecord } from '../auth/index.ts';
import { now } from '../clock.ts';
import { ServiceError } from '../errors/index.ts';
import type { HttpContext } from './context.ts';
import type { Services } from './services.ts';
import type { UserRecord } from '../store/index.ts';

export interface AdminSession {
  key: string;
  session: SessionRecord;
  user: UserRecord;
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The session behind the cookie, or 401 invalid_session. Only the cookie is read: a Bearer
 * business token is not a session. The user record is read on every call, so disabling an
 * account ends its sessions at once. */
export async function requireSession(ctx: HttpContext, s: Services): Promise<AdminSession> {
  const found = await findSession(s.store, s.config, readSessionCookie(s.config, ctx.headers['cookie']), now());
  if (!found) throw new ServiceError('invalid_session');
  const user = await s.store.getUser(found.session.user_id);
  if (!user || !user.enabled) {
    destroySession(s.store, found.key).catch(() => {});
    throw new ServiceError('invalid_session');
  }
  return { ...found, user };
}

/** contract.md "Administration API": session (401), role admin (403 forbidden), then for
 * POST/PUT/PATCH/DELETE the X-CSRF-Token (403 csrf_failed). A handler awaits it before
 * claiming its body (held meanwhile, see HttpContext.holdUnclaimedBody). */
export async function requireAdmin(ctx: HttpContext, s: Services): Promise<AdminSession> {
  const a = await requireSession(ctx, s);
  if (a.user.role !== 'admin') throw new ServiceError('forbidden');
  requireCsrf(ctx, a.session);
  // the request line does not say who: changes are attributable to an operator here
  if (STATE_CHANGING.has(ctx.method)) s.log.info({ request_id: ctx.requestId, admin: a.user.username, method: ctx.method, path: ctx.path }, 'admin action');
  return a;
}

export function requireCsrf(ctx: HttpContext, session: SessionRecord): void {
  if (STATE_CHANGING.has(ctx.method) && !csrfMatches(session.csrf_token, ctx.headers['x-csrf-token'])) {
    throw new ServiceError('csrf_failed');
  }
}
