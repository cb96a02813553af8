import { requireBusinessToken } from '../../auth/index.ts';
import { now } from '../../clock.ts';
import { bodyParser } from '../../packets/index.ts';
import { MAX_ID_CHARS } from '../../admin/index.ts';
import { ServiceError } from '../../errors/index.ts';
import { activeSessions, mintSession, ownSession, revokeSessionById, sessionStatus, SessionCreateSchema, withinToken } from '../../sessions/index.ts';
import { readJson } from '../body.ts';
import { json } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

const parseCreate = bodyParser(SessionCreateSchema);

/** /v1/sessions (issue 26): a backend, with its business token, mints a device session, reads
 * its results and revokes it. A session token is refused on all three (403 session_not_allowed). */
export function sessionRoutes(router: Router, s: Services): void {
  router.add('POST', '/v1/sessions', async (ctx) => {
    // the token before the body: an unauthenticated caller learns nothing of the schema
    const token = await requireBusinessToken(s.store, ctx.headers['authorization'], now());
    const input = parseCreate(await readJson(ctx, 4096));
    const created = await mintSession(s.store, s.config, token, input, now());
    s.metrics.sessionsMinted.inc({ module: created.module_id });
    return json(201, created);
  });
  router.add('GET', '/v1/sessions/:session_id', async (ctx, p) => {
    const at = now();
    const token = await requireBusinessToken(s.store, ctx.headers['authorization'], at);
    return json(200, await sessionStatus(s.store, withinToken(await ownSession(s.store, token, p.session_id!), token), at));
  });
  router.add('DELETE', '/v1/sessions/:session_id', async (ctx, p) => {
    const at = now();
    const token = await requireBusinessToken(s.store, ctx.headers['authorization'], at);
    await s.store.revokeDeviceSession((await ownSession(s.store, token, p.session_id!)).id, at);
    return { status: 204 };
  });

  // the console's token detail lists the sessions devices hold now
  router.admin('GET', '/admin/api/tokens/:id/sessions', async (_ctx, p) => {
    const id = p.id!;
    // as every /admin/api/tokens/:id route: an id that cannot exist names nothing (issue 29)
    const token = [...id].length > MAX_ID_CHARS || id.includes('\u0000') ? undefined : await s.store.getToken(id);
    if (!token) throw new ServiceError('not_found');
    return json(200, { sessions: await activeSessions(s.store, token, now()) });
  });
  // an operator ends one device (a lost or misbehaving one) and leaves the token and its other
  // sessions alone; the session token answers 401 invalid_session_token from now on
  router.admin('DELETE', '/admin/api/sessions/:session_id', async (ctx, p, who) => {
    const revoked = await revokeSessionById(s.store, p.session_id!, now());
    if (!revoked) throw new ServiceError('not_found', 'Unknown session');
    s.log.info({ request_id: ctx.requestId, session_id: revoked.session_id, token_id: revoked.token_id, by: who.user.username }, 'device session revoked by an operator');
    return { status: 204 };
  });
}
