import { ServiceError } from '../errors/index.ts';
import type { AdminSession } from './admin-guard.ts';
import type { HttpContext } from './context.ts';
import type { Reply } from './respond.ts';

export type Params = Record<string, string>;
/** Handlers run synchronously up to their first await: any body must be claimed
 * (ctx body readers) before that, because uWS only streams to a reader attached in time. */
export type Handler = (ctx: HttpContext, params: Params) => Reply | Promise<Reply>;

/** An administration handler: it runs only after the guard has admitted the caller, and is
 * handed the session the guard found. */
export type AdminHandler = (ctx: HttpContext, params: Params, who: AdminSession) => Reply | Promise<Reply>;
/** Session, role and CSRF (src/http/admin-guard.ts requireAdmin): resolves or throws the refusal. */
export type AdminGuard = (ctx: HttpContext) => Promise<AdminSession>;

interface Route {
  method: string;
  pattern: string;
  segments: string[];
  handler: Handler;
  /** registered through `admin`: the guard runs before the handler */
  guarded: boolean;
}

export type Match = { handler: Handler; params: Params; pattern: string };
export type RouteInfo = { method: string; pattern: string; guarded: boolean };

export const ADMIN_API_PREFIX = '/admin/api/';

/** Not an HTTP error: a programming mistake caught when routes are registered at start-up. */
export class RouteRegistrationError extends Error {
  override name = 'RouteRegistrationError';
}

/** True when the pattern could match some path under /admin/api/: its first two segments are
 * `admin`/`api` literally or a parameter or wildcard that would take them. A route such as
 * `/:anything/api/users` would otherwise answer /admin/api/users without the guard. */
function reachesAdminApi(segments: string[]): boolean {
  const takes = (s: string | undefined, literal: string) => s === literal || s === '*' || (s !== undefined && s.startsWith(':'));
  if (segments[0] === '*') return true;
  if (!takes(segments[0], 'admin')) return false;
  return segments[1] === undefined ? false : takes(segments[1], 'api');
}

export class Router {
  private routes: Route[] = [];

  /** Without a guard, no administration route can be registered at all. */
  constructor(private readonly guard?: AdminGuard) {}

  /** Any route outside /admin/api/. A pattern that could match a path under /admin/api/ is
   * refused here, at registration, so an unguarded admin route cannot be written. */
  add(method: string, pattern: string, handler: Handler): this {
    const segments = pattern.split('/').slice(1);
    if (reachesAdminApi(segments)) {
      throw new RouteRegistrationError(`${method} ${pattern} reaches ${ADMIN_API_PREFIX}: register it with Router.admin, which runs the admin guard`);
    }
    this.routes.push({ method, pattern, segments, handler, guarded: false });
    return this;
  }

  /** The only way to register a route under /admin/api/: the handler runs after the guard
   * (awaited here, so no handler can forget it) and receives the admitted session. */
  admin(method: string, pattern: string, handler: AdminHandler): this {
    const guard = this.guard;
    if (!guard) throw new RouteRegistrationError(`${method} ${pattern}: this router has no admin guard`);
    if (!pattern.startsWith(ADMIN_API_PREFIX) || pattern.split('/').slice(1, 3).some((s) => s.startsWith(':') || s === '*')) {
      throw new RouteRegistrationError(`${method} ${pattern}: Router.admin takes literal ${ADMIN_API_PREFIX} paths only`);
    }
    this.routes.push({ method, pattern, segments: pattern.split('/').slice(1), handler: async (ctx, p) => handler(ctx, p, await guard(ctx)), guarded: true });
    return this;
  }

  /** The route table as registered (tests: OpenAPI coverage, every admin route guarded). */
  list(): RouteInfo[] {
    return this.routes.map(({ method, pattern, guarded }) => ({ method, pattern, guarded }));
  }

  /** Exact segments win over parameters; a path that exists under another method is 405. */
  match(method: string, path: string): Match {
    const parts = path.split('/').slice(1);
    const allowed = new Set<string>();
    let best: { route: Route; params: Params; score: number } | undefined;
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      if (route.method !== method && !(method === 'HEAD' && route.method === 'GET')) {
        allowed.add(route.method);
        continue;
      }
      const score = route.segments.filter((s) => !s.startsWith(':') && s !== '*').length;
      if (!best || score > best.score) best = { route, params, score };
    }
    if (best) return { handler: best.route.handler, params: best.params, pattern: best.route.pattern };
    if (allowed.size > 0) {
      const allow = [...allowed].sort().join(', ');
      throw new ServiceError('method_not_allowed', `${method} is not allowed on ${path}; allowed: ${allow}`, { Allow: allow });
    }
    throw new ServiceError('not_found', `No route for ${path}`);
  }
}

function matchSegments(pattern: string[], parts: string[]): Params | null {
  const params: Params = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    if (p === '*') {
      params['*'] = parts.slice(i).map(safeDecode).join('/');
      return params;
    }
    const part = parts[i];
    if (part === undefined) return null;
    if (p.startsWith(':')) {
      if (part === '') return null;
      params[p.slice(1)] = safeDecode(part);
    } else if (p !== part) return null;
  }
  return parts.length === pattern.length ? params : null;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
