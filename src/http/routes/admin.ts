import { requireAdmin } from '../../admin/guard.ts';
import { isModuleId, moduleView, moduleViews } from '../../admin/modules.ts';
import { parsePageQuery } from '../../admin/page-query.ts';
import {
  GrantBodySchema,
  ModulePatchSchema,
  SettlementResolveSchema,
  TokenCreateSchema,
  TokenPatchSchema,
  UserCreateSchema,
  UserPatchSchema,
} from '../../admin/schemas.ts';
import { createToken, listTokenViews, patchToken, removeGrant, revokeToken, setGrant, tokenDetail } from '../../admin/tokens.ts';
import { addUser, listUserViews, patchUser } from '../../admin/users.ts';
import { bodyParser } from '../../admin/validate.ts';
import { destroyUserSessions } from '../../auth/session.ts';
import { ServiceError, ValidationFailure } from '../../errors/index.ts';
import { listAudit, listLedger, listPendingSettlements, resolveSettlement } from '../../metering/index.ts';
import type { ModuleId } from '../../packets/types.ts';
import { setModuleEnabled } from '../../store/modules.ts';
import { getToken } from '../../store/tokens.ts';
import { DuplicateUserError, getUser, listUsers } from '../../store/users.ts';
import { readJson } from '../body.ts';
import { json, type Reply } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

const parse = {
  modulePatch: bodyParser(ModulePatchSchema),
  userCreate: bodyParser(UserCreateSchema),
  userPatch: bodyParser(UserPatchSchema),
  tokenCreate: bodyParser(TokenCreateSchema),
  tokenPatch: bodyParser(TokenPatchSchema),
  grant: bodyParser(GrantBodySchema),
  resolve: bodyParser(SettlementResolveSchema),
};

const noContent: Reply = { status: 204 };

function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new ServiceError('not_found', `Unknown ${what}`);
  return value;
}

function moduleParam(id: string | undefined): ModuleId {
  if (id === undefined || !isModuleId(id)) throw new ServiceError('not_found', 'Unknown module id');
  return id;
}

/** contract.md "Administration API". Every handler runs requireAdmin (session, role, CSRF)
 * synchronously before it claims the body, so a refused call never reads one. */
export function adminRoutes(router: Router, s: Services): void {
  const { store } = s;

  router.add('GET', '/admin/api/modules', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, { modules: moduleViews(store, s.inference, s.config.MODEL_SET) });
  });

  router.add('PATCH', '/admin/api/modules/:module_id', async (ctx, p) => {
    requireAdmin(ctx, s);
    const id = moduleParam(p.module_id);
    const body = parse.modulePatch(await readJson(ctx));
    await setModuleEnabled(store, id, body.enabled);
    return json(200, moduleView(store, s.inference, id, s.config.MODEL_SET));
  });

  router.add('GET', '/admin/api/users', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, { users: listUserViews(store) });
  });

  router.add('POST', '/admin/api/users', async (ctx) => {
    requireAdmin(ctx, s);
    const body = parse.userCreate(await readJson(ctx));
    try {
      return json(201, await addUser(store, body));
    } catch (e) {
      if (e instanceof DuplicateUserError) throw new ServiceError('conflict', `User ${body.username} exists`);
      throw e;
    }
  });

  router.add('PATCH', '/admin/api/users/:id', async (ctx, p) => {
    const admin = requireAdmin(ctx, s);
    const body = parse.userPatch(await readJson(ctx));
    const before = found(getUser(store, p.id!), 'user');
    const losesAdmin = before.role === 'admin' && before.enabled && (body.role === 'user' || body.enabled === false);
    if (losesAdmin && !listUsers(store).some((u) => u.id !== before.id && u.role === 'admin' && u.enabled)) {
      // without an enabled admin nobody could log in to undo it
      throw new ServiceError('conflict', 'At least one enabled admin must remain');
    }
    const user = found(await patchUser(store, before.id, body), 'user');
    // a changed password, a disabled account or a lost role ends the user's other sessions
    if (body.password !== undefined || losesAdmin) {
      await destroyUserSessions(store, user.id, user.id === admin.user.id && !losesAdmin ? admin.key : undefined);
    }
    return json(200, user);
  });

  router.add('GET', '/admin/api/tokens', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, { tokens: listTokenViews(store) });
  });

  router.add('POST', '/admin/api/tokens', async (ctx) => {
    requireAdmin(ctx, s);
    const body = parse.tokenCreate(await readJson(ctx));
    const seen = new Set<string>();
    body.grants.forEach((g, i) => {
      if (seen.has(g.module_id)) {
        throw new ValidationFailure([{ loc: ['body', 'grants', i, 'module_id'], msg: 'Each module may be granted once', type: 'value_error', input: g.module_id }]);
      }
      seen.add(g.module_id);
    });
    // the plaintext is in this answer and nowhere else: only its hash is stored
    const { token, plaintext } = await createToken(store, body);
    return json(201, { ...token, token: plaintext });
  });

  router.add('GET', '/admin/api/tokens/:id', (ctx, p) => {
    requireAdmin(ctx, s);
    return json(200, found(tokenDetail(store, p.id!), 'token'));
  });

  router.add('PATCH', '/admin/api/tokens/:id', async (ctx, p) => {
    requireAdmin(ctx, s);
    const body = parse.tokenPatch(await readJson(ctx));
    return json(200, found(await patchToken(store, p.id!, body), 'token'));
  });

  router.add('DELETE', '/admin/api/tokens/:id', async (ctx, p) => {
    requireAdmin(ctx, s);
    found(await revokeToken(store, p.id!), 'token');
    return noContent;
  });

  router.add('PUT', '/admin/api/tokens/:id/grants/:module_id', async (ctx, p) => {
    requireAdmin(ctx, s);
    const moduleId = moduleParam(p.module_id);
    const body = parse.grant(await readJson(ctx));
    found(getToken(store, p.id!), 'token');
    return json(200, found(await setGrant(store, p.id!, { module_id: moduleId, ...body }), 'token'));
  });

  router.add('DELETE', '/admin/api/tokens/:id/grants/:module_id', async (ctx, p) => {
    requireAdmin(ctx, s);
    const moduleId = moduleParam(p.module_id);
    const had = found(await removeGrant(store, p.id!, moduleId), 'token');
    if (!had) throw new ServiceError('not_found', `Token has no grant for ${moduleId}`);
    return noContent;
  });

  router.add('GET', '/admin/api/usage', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, listLedger(store, parsePageQuery(ctx.searchParams())));
  });

  router.add('GET', '/admin/api/audit', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, listAudit(store, parsePageQuery(ctx.searchParams())));
  });

  router.add('GET', '/admin/api/settlements', (ctx) => {
    requireAdmin(ctx, s);
    return json(200, { settlements: listPendingSettlements(store) });
  });

  router.add('POST', '/admin/api/settlements/:id/resolve', async (ctx, p) => {
    requireAdmin(ctx, s);
    const body = parse.resolve(await readJson(ctx));
    // Only what the list shows: a reservation still `pending` may belong to a verify call in
    // flight, and start-up recovery settles those whose process is gone.
    if (!listPendingSettlements(store).some((x) => x.id === p.id)) {
      if (store.db.reservations.get(p.id!) === undefined) throw new ServiceError('not_found', 'Unknown settlement');
      throw new ServiceError('conflict', 'The settlement is not waiting for an operator');
    }
    const r = found(await resolveSettlement(store, p.id!, body.action), 'settlement');
    if (r === 'not_pending') throw new ServiceError('conflict', 'The settlement is no longer pending');
    return json(200, r);
  });
}
