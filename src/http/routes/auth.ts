import { requireCsrf, requireSession } from '../admin-guard.ts';
import { addressKey } from '../capacity.ts';
import { clientAddress } from '../client-address.ts';
import { login, parseLogin, sessionBody, clearedCookie, readSessionCookie, sessionCookie, destroySession, sessionKey } from '../../auth/index.ts';
import { now } from '../../clock.ts';
import { readJson } from '../body.ts';
import { json } from '../respond.ts';
import { ServiceError } from '../../errors/index.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

/** contract.md "Authentication and sessions": /auth/login, /auth/session, /auth/logout. */
export function authRoutes(router: Router, s: Services): void {
  router.add('POST', '/auth/login', async (ctx) => {
    const address = clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']);
    const previous = readSessionCookie(s.config, ctx.headers['cookie']);
    const input = parseLogin(await readJson(ctx));
    let out;
    try {
      // The throttle counts by network, as capacity does: an IPv6 host picks any address of
      // its /64 (privacy extensions, or on purpose), so a full-address key gave one guesser
      // 2^64 fresh addresses. The log keeps the full address.
      out = await login(s.store, s.config, input, addressKey(address), now());
    } catch (err) {
      // who was tried and from where (never the password), so an operator can see a guesser
      if (err instanceof ServiceError) s.log.warn({ request_id: ctx.requestId, username: input.username, client_address: address, code: err.code }, 'login failed');
      throw err;
    }
    const { id, session } = out;
    // a login from a browser that still holds a session replaces it instead of adding one
    if (previous !== undefined) await destroySession(s.store, sessionKey(previous));
    return json(200, sessionBody(session), { 'Set-Cookie': sessionCookie(s.config, id) });
  });

  router.add('GET', '/auth/session', async (ctx) => {
    const { session, user } = await requireSession(ctx, s);
    return json(200, sessionBody({ ...session, role: user.role }));
  });

  router.add('POST', '/auth/logout', async (ctx) => {
    const { key, session } = await requireSession(ctx, s);
    requireCsrf(ctx, session);
    await destroySession(s.store, key);
    return { status: 204, headers: { 'Set-Cookie': clearedCookie(s.config) } };
  });
}
