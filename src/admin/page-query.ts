import { ValidationFailure } from '../errors/index.ts';
import type { PageQuery } from '../metering/index.ts';
import type { ValidationIssue } from '../packets/types.ts';

const KNOWN = new Set(['token_id', 'module_id', 'from', 'to', 'cursor', 'limit']);
export const MAX_PAGE = 1000;

/** Query of GET /admin/api/usage and /admin/api/audit: `from` (inclusive) and `to`
 * (exclusive) are ISO 8601 times, `limit` 1..1000 (default 100), `cursor` the
 * `next_cursor` of the previous page. Unknown parameters are refused like unknown fields. */
export function parsePageQuery(params: URLSearchParams): PageQuery {
  const issues: ValidationIssue[] = [];
  const q: PageQuery = {};
  for (const [name, value] of params) {
    if (!KNOWN.has(name)) {
      issues.push({ loc: ['query', name], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
      continue;
    }
    if (value === '') continue;
    switch (name) {
      case 'token_id':
      case 'module_id':
        q[name] = value;
        break;
      case 'from':
      case 'to': {
        const ms = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(value) ? Date.parse(value) : NaN;
        if (Number.isNaN(ms)) issues.push({ loc: ['query', name], msg: 'Input should be an ISO 8601 date or time', type: 'datetime_parsing', input: value });
        else q[name] = ms;
        break;
      }
      case 'limit':
        if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > MAX_PAGE) {
          issues.push({ loc: ['query', 'limit'], msg: `Input should be an integer from 1 to ${MAX_PAGE}`, type: 'int_parsing', input: value });
        } else q.limit = Number(value);
        break;
      case 'cursor':
        if (!validCursor(value)) issues.push({ loc: ['query', 'cursor'], msg: 'Input should be a next_cursor returned by this endpoint', type: 'value_error', input: value.slice(0, 256) });
        else q.cursor = value;
        break;
    }
  }
  if (issues.length > 0) throw new ValidationFailure(issues);
  return q;
}

/** The metering pager decodes cursors as JSON [epoch ms, id]; a forged one must be a 422
 * here, not a parse error there. */
function validCursor(value: string): boolean {
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(value)) return false;
  try {
    const key = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown;
    return Array.isArray(key) && key.length === 2 && Number.isFinite(key[0]) && typeof key[1] === 'string';
  } catch {
    return false;
  }
}
