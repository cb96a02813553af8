import { ServiceError } from '../errors/index.ts';
import type { HttpContext } from './context.ts';
import type { Reply } from './respond.ts';

export type Params = Record<string, string>;
/** Handlers run synchronously up to their first await: any body must be claimed
 * (ctx body readers) before that, because uWS only streams to a reader attached in time. */
export type Handler = (ctx: HttpContext, params: Params) => Reply | Promise<Reply>;

interface Route {
  method: string;
  pattern: string;
  segments: string[];
  handler: Handler;
}

export type Match = { handler: Handler; params: Params; pattern: string };

export class Router {
  private routes: Route[] = [];

  add(method: string, pattern: string, handler: Handler): this {
    this.routes.push({ method, pattern, segments: pattern.split('/').slice(1), handler });
    return this;
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
