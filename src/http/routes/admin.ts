import { isModuleId, moduleView, moduleViews, overview, auditOutcome, MAX_ID_CHARS, parseAuditQuery, parseDailyQuery, parseListQuery, parsePageQuery, GrantBodySchema, ModulePatchSchema, SettlementResolveSchema, TokenCreateSchema, TokenPatchSchema, UserCreateSchema, UserPatchSchema, createToken, DuplicateTokenNameError, duplicateGrantIndex, listTokenViews, patchToken, removeGrant, revokeToken, RevokedTokenError, searchTokenViews, setGrant, tokenDetail, withTokenNames, addUser, LastAdminError, listUserViews, patchUser, searchUserViews } from '../../admin/index.ts';
import { bodyParser } from '../../packets/index.ts';
import { destroyUserSessions, checkPasswordThrottled } from '../../auth/index.ts';
import { addressKey } from '../capacity.ts';
import { clientAddress } from '../client-address.ts';
import { ServiceError, ValidationFailure } from '../../errors/index.ts';
import { now } from '../../clock.ts';
import { listPendingSettlements, resolveSettlement } from '../../metering/index.ts';
import type { ModuleId } from '../../contract/index.ts';
import { DuplicateUserError, type UserRecord } from '../../store/index.ts';
import { readJson } from '../body.ts';
import { json, type Reply } from '../respond.ts';
import type { AdminHandler, Router } from '../router.ts';
import type { AdminSession } from '../admin-guard.ts';
import type { HttpContext } from '../context.ts';
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

/** 422 when missing; else checked as a login of the acting operator would be (same counts,
 * same limits): 429 too_many_attempts past them, 403 invalid_current_password when wrong. */
async function requireCurrentPassword(ctx: HttpContext, s: Services, who: AdminSession, current: string | undefined): Promise<void> {
  if (current === undefined) throw new ValidationFailure([{ loc: ['body', 'current_password'], msg: 'Field required', type: 'missing' }]);
  const address = clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']);
  let checked;
  try {
    // counted by network as logins are (routes/auth.ts): an IPv6 /64 is one address
    checked = await checkPasswordThrottled(s.store, who.user.username, current, addressKey(address), now());
  } catch (err) {
    if (err instanceof ServiceError) s.log.warn({ request_id: ctx.requestId, username: who.user.username, client_address: address, code: err.code }, 'password check failed');
    throw err;
  }
  if (checked?.id !== who.user.id) {
    s.log.warn({ request_id: ctx.requestId, username: who.user.username, client_address: address, code: 'invalid_current_password' }, 'password check failed');
    throw new ServiceError('invalid_current_password');
  }
}

/** What a user patch does to admin access (each needs the acting operator's password):
 * promoting or re-enabling an admin gives it, demoting or disabling one takes it. A change
 * that changes nothing (enabled: true on an enabled account) is none. */
function adminAccessChanges(before: UserRecord, patch: { enabled?: boolean; role?: UserRecord['role'] }): string[] {
  const out: string[] = [];
  const role = patch.role ?? before.role;
  if (patch.role !== undefined && patch.role !== before.role) out.push(patch.role === 'admin' ? 'admin_promoted' : 'admin_demoted');
  if (patch.enabled !== undefined && patch.enabled !== before.enabled && (role === 'admin' || before.role === 'admin')) {
    out.push(patch.enabled ? 'admin_enabled' : 'admin_disabled');
  }
  return out;
}

/** Changes to operators' accounts are logged with who made them and from where (the
 * acting operator's name and client address), so a takeover leaves a trail in the journal. */
function accountChanged(ctx: HttpContext, s: Services, who: AdminSession, target: { id: string; username: string }, changes: string[]): void {
  const address = clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']);
  s.log.info({ request_id: ctx.requestId, actor: who.user.username, actor_id: who.user.id, client_address: address, target: target.username, target_id: target.id, changes }, 'operator account changed');
}

function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new ServiceError('not_found', `Unknown ${what}`);
  return value;
}

function moduleParam(id: string | undefined): ModuleId {
  if (id === undefined || !isModuleId(id)) throw new ServiceError('not_found', 'Unknown module id');
  return id;
}

/** Token names are unique: a create or rename to a taken name is a 409 conflict. */
async function nameChecked<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (e) {
    if (e instanceof DuplicateTokenNameError) throw new ServiceError('conflict', e.message);
    throw e;
  }
}

/** contract.md "Administration API". Every handler runs after the admin guard (Router.admin:
 * session, role, CSRF) and before it claims the body, so a refused call never reads one (the body is held, paused,
 * while the session is looked up, and drained by the refusal). */
export function adminRoutes(router: Router, s: Services): void {
  const { store } = s;
  // A store written by an older build has no token name index, daily totals or per-token
  // index yet: build them now (once, whichever worker is first), not on an operator's first
  // click. Should that fail, the first two are built on first use and token filters scan.
  // registration without a store (the OpenAPI coverage test) builds nothing
  store?.ensureConsoleIndexes().catch((err: unknown) => s.log.error({ err }, 'building a console index failed'));
  // Router.admin runs the guard (session, role, CSRF) before the handler; router.add refuses
  // /admin/api/ paths, so no admin route can be registered without it.
  const admin = (method: string, path: string, handler: AdminHandler) =>
    router.admin(method, path, (ctx, p, who) => {
      // an id past MAX_ID_CHARS, or with a NUL, names nothing (and failed in the store: past
      // LMDB's key size, a NUL in PostgreSQL text; a 500, issue 29)
      if (p.id !== undefined && ([...p.id].length > MAX_ID_CHARS || p.id.includes('\u0000'))) throw new ServiceError('not_found');
      return handler(ctx, p, who);
    });

  // the console's first page: calls and outcomes over the last hour and day, capacity, models,
  // settlements waiting, tokens nearing their limits
  admin('GET', '/admin/api/overview', async () => {
    const slots = { total: s.config.VERIFY_SLOTS, in_use: s.admission.inUse() };
    return json(200, await overview(store, s.inference, s.config.MODEL_SET, slots, now()));
  });

  // a charged call's result records (the audit row's detail in the console), while kept
  admin('GET', '/admin/api/results/:id', async (_ctx, p) => {
    const r = found(await store.getResults(p.id!), 'result (never charged, or past RETENTION_RESULTS_DAYS)');
    return json(200, { request_id: p.id, ...r });
  });

  admin('GET', '/admin/api/modules', async (ctx) => {
    return json(200, { modules: await moduleViews(store, s.inference, s.config.MODEL_SET) });
  });

  admin('PATCH', '/admin/api/modules/:module_id', async (ctx, p) => {
    const id = moduleParam(p.module_id);
    const body = parse.modulePatch(await readJson(ctx));
    await store.setModuleEnabled(id, body.enabled);
    return json(200, await moduleView(store, s.inference, id, s.config.MODEL_SET));
  });

  // Without q, limit or cursor: every user, as the contract has it; with any: a page.
  admin('GET', '/admin/api/users', async (ctx) => {
    const q = parseListQuery(ctx.searchParams());
    return json(200, q ? await searchUserViews(store, q) : { users: await listUserViews(store) });
  });

  admin('POST', '/admin/api/users', async (ctx, _p, who) => {
    const body = parse.userCreate(await readJson(ctx));
    // a new admin is persistence for whoever holds a session: only with the acting
    // operator's own password (a role `user` account cannot log in, and needs none)
    if (body.role === 'admin') await requireCurrentPassword(ctx, s, who, body.current_password);
    let made;
    try {
      made = await addUser(store, body);
    } catch (e) {
      if (e instanceof DuplicateUserError) throw new ServiceError('conflict', `User ${body.username} exists`);
      throw e;
    }
    accountChanged(ctx, s, who, made, body.role === 'admin' ? ['admin_created'] : ['user_created']);
    return json(201, made);
  });

  admin('PATCH', '/admin/api/users/:id', async (ctx, p, who) => {
    const body = parse.userPatch(await readJson(ctx));
    const before = found(await store.getUser(p.id!), 'user');
    // A new password ends the owner's other sessions, and a change of admin access gives a
    // session's thief an account of their own or locks the other operators out, so a session
    // alone (stolen, or a browser left open) is not enough for either: the acting operator
    // proves who they are with their own password, under the login throttle so it cannot be
    // guessed here.
    const access = adminAccessChanges(before, body);
    const proved = body.password !== undefined || access.length > 0;
    if (proved) await requireCurrentPassword(ctx, s, who, body.current_password);
    // `before` was read before the slow password check: a patch let through without one is
    // checked again on the record it changes, so a concurrent promotion cannot turn an
    // "enable this user" into an admin enabled without the password
    const unchanged = proved ? undefined : (b: UserRecord, a: UserRecord) => {
      if (adminAccessChanges(b, { role: a.role, enabled: a.enabled }).length > 0) throw new ServiceError('conflict', 'The user changed meanwhile; this change now needs current_password');
    };
    let user;
    try {
      user = found(await patchUser(store, before.id, { enabled: body.enabled, password: body.password, role: body.role }, unchanged), 'user');
    } catch (e) {
      if (e instanceof LastAdminError) throw new ServiceError('conflict', e.message);
      throw e;
    }
    // A changed password or a disabled account ends the user's other sessions. A lost role
    // does not: the guard reads the role on every call, so such a session gets the
    // contract's 403 forbidden on the admin API and can still log out.
    const disabled = body.enabled === false && before.enabled;
    if (body.password !== undefined || disabled) {
      await destroyUserSessions(store, user.id, user.id === who.user.id && !disabled ? who.key : undefined);
    }
    const changes = body.password !== undefined ? [...access, 'password_set'] : access;
    if (changes.length > 0) accountChanged(ctx, s, who, user, changes);
    return json(200, user);
  });

  // Without q, name, limit or cursor: every token in creation order, as the contract has it;
  // with any: a page in name order with next_cursor.
  admin('GET', '/admin/api/tokens', async (ctx) => {
    const q = parseListQuery(ctx.searchParams(), { names: true });
    return json(200, q ? await searchTokenViews(store, q) : { tokens: await listTokenViews(store) });
  });

  admin('POST', '/admin/api/tokens', async (ctx) => {
    const body = parse.tokenCreate(await readJson(ctx));
    const twice = duplicateGrantIndex(body.grants);
    if (twice >= 0) {
      throw new ValidationFailure([{ loc: ['body', 'grants', twice, 'module_id'], msg: 'Each module may be granted once', type: 'value_error', input: body.grants[twice]!.module_id }]);
    }
    // the plaintext is in this answer and nowhere else: only its hash is stored
    const { token, plaintext } = await nameChecked(() => createToken(store, body));
    return json(201, { ...token, token: plaintext });
  });

  admin('GET', '/admin/api/tokens/:id', async (ctx, p) => {
    return json(200, found(await tokenDetail(store, p.id!), 'token'));
  });

  admin('PATCH', '/admin/api/tokens/:id', async (ctx, p) => {
    const body = parse.tokenPatch(await readJson(ctx));
    try {
      return json(200, found(await nameChecked(() => patchToken(store, p.id!, body)), 'token'));
    } catch (e) {
      if (e instanceof RevokedTokenError) throw new ServiceError('conflict', e.message);
      throw e;
    }
  });

  admin('DELETE', '/admin/api/tokens/:id', async (ctx, p) => {
    found(await revokeToken(store, p.id!), 'token');
    return noContent;
  });

  admin('PUT', '/admin/api/tokens/:id/grants/:module_id', async (ctx, p) => {
    const moduleId = moduleParam(p.module_id);
    const body = parse.grant(await readJson(ctx));
    return json(200, found(await setGrant(store, p.id!, { module_id: moduleId, ...body }), 'token'));
  });

  admin('DELETE', '/admin/api/tokens/:id/grants/:module_id', async (ctx, p) => {
    const moduleId = moduleParam(p.module_id);
    const had = found(await removeGrant(store, p.id!, moduleId), 'token');
    if (!had) throw new ServiceError('not_found', `Token has no grant for ${moduleId}`);
    return noContent;
  });

  admin('GET', '/admin/api/usage', async (ctx) => {
    const page = await store.listLedger(parsePageQuery(ctx.searchParams()));
    return json(200, { items: await withTokenNames(store, page.items), next_cursor: page.next_cursor });
  });

  // Units per UTC day from the totals kept with the ledger, every day of the range listed.
  admin('GET', '/admin/api/usage/daily', async (ctx) => {
    const q = parseDailyQuery(ctx.searchParams(), now());
    const days = await store.dailyTotals(q);
    return json(200, { from: q.fromDay, to: q.toDay, days, total: days.reduce((sum, d) => sum + d.units, 0) });
  });

  admin('GET', '/admin/api/audit', async (ctx) => {
    const { page, where } = parseAuditQuery(ctx.searchParams());
    const found = await store.listAudit(page, where);
    const items = found.items.map((a) => ({ ...a, outcome: auditOutcome(a), replayed: a.replayed ?? null }));
    return json(200, { items: await withTokenNames(store, items), next_cursor: found.next_cursor });
  });

  admin('GET', '/admin/api/settlements', async (ctx) => {
    return json(200, { settlements: await listPendingSettlements(store) });
  });

  admin('POST', '/admin/api/settlements/:id/resolve', async (ctx, p) => {
    const body = parse.resolve(await readJson(ctx));
    // resolveSettlement takes only what the list shows (settlement_failed): a pending
    // reservation may belong to a verify call still in flight.
    const r = found(await resolveSettlement(store, p.id!, body.action), 'settlement');
    if (r === 'not_pending') throw new ServiceError('conflict', 'The settlement is not waiting for an operator');
    if (body.action === 'refund') s.metrics.units.inc({ module: r.module_id, kind: 'refunded' }, r.units);
    return json(200, r);
  });
}
