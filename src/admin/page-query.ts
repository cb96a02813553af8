import { ValidationFailure } from '../errors/index.ts';
import { AUDIT_OUTCOMES, type AuditOutcome, type AuditRecord, type PageQuery } from '../store/index.ts';
import { MODULE_IDS, type ValidationIssue } from '../contract/index.ts';
import { isModuleId } from './modules.ts';
import { isCalendarText } from './calendar.ts';

export const MAX_PAGE = 1000;
/** Widest range of GET /admin/api/usage/daily, so one call stays one short read. */
export const MAX_DAYS = 400;
/** Longest id the administration API looks up (ids are like tok_4vX9Qm2Lr8Tz). A longer one
 * names nothing, and past the store's key size (LMDB: 1978 bytes) the lookup itself failed
 * with a 500 (issue 29): ids in the path answer 404, token_id in a query 422. */
export const MAX_ID_CHARS = 128;
/** Longest name a name-ordered cursor can hold (token names are at most 200 characters,
 * usernames 64). */
const MAX_NAME_CHARS = 200;
/** Days listed by GET /admin/api/usage/daily without `from`. */
export const DEFAULT_DAYS = 30;

const PAGE_PARAMS = ['token_id', 'module_id', 'from', 'to', 'cursor', 'limit', 'order'];
const AUDIT_PARAMS = [...PAGE_PARAMS, 'status', 'outcome'];
const ISO = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/;
/** Times a query may name (issue 29): `to=0000-01-01` once answered days such as `-000001-11`,
 * which no client can parse as a date. Four-digit years of this era only, as instants, so an
 * offset cannot carry a time past either end. Stated in the OpenAPI document (from, to). */
export const EARLIEST = Date.UTC(2000, 0, 1);
export const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
export const TIME_RANGE_TEXT = 'from 2000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z';

type Issues = ValidationIssue[];

/** Collects the query's issues; unknown parameters are refused like unknown body fields. */
function reader(params: URLSearchParams, known: readonly string[]) {
  const issues: Issues = [];
  const values = new Map<string, string>();
  for (const [name, value] of params) {
    if (!known.includes(name)) issues.push({ loc: ['query', name], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
    // PostgreSQL text cannot hold U+0000: a NUL reached the store as a query error, a 500
    // (issue 29). No id, name or search text has one.
    else if (value.includes('\u0000')) issues.push({ loc: ['query', name], msg: 'Input should be text without NUL characters', type: 'string_unicode', input: value.slice(0, 256) });
    else if (value !== '') values.set(name, value);
  }
  // the issue is passed as `{ type: '...' }` so the catalogue test (test/openapi/catalogues.test.ts) sees every type
  const fail = (name: string, msg: string, { type }: { type: string }) => issues.push({ loc: ['query', name], msg, type, input: values.get(name)!.slice(0, 256) });
  return {
    issues,
    values,
    fail,
    id(name: string): string | undefined {
      const v = values.get(name);
      if (v === undefined || [...v].length <= MAX_ID_CHARS) return v;
      fail(name, `String should have at most ${MAX_ID_CHARS} characters`, { type: 'string_too_long' });
      return undefined;
    },
    /** module_id: one of the modules (the document's ModuleId), as the path's module is */
    moduleId(): string | undefined {
      const v = values.get('module_id');
      if (v === undefined || isModuleId(v)) return v;
      fail('module_id', `Input should be ${MODULE_IDS.map((m) => `'${m}'`).join(' or ')}`, { type: 'literal_error' });
      return undefined;
    },
    time(name: string): number | undefined {
      const v = values.get(name);
      if (v === undefined) return undefined;
      const ms = ISO.test(v) && isCalendarText(v) ? Date.parse(v) : NaN;
      if (Number.isNaN(ms)) {
        fail(name, 'Input should be an ISO 8601 date or time', { type: 'datetime_parsing' });
        return undefined;
      }
      if (ms < EARLIEST) fail(name, `Input should be a time ${TIME_RANGE_TEXT}`, { type: 'greater_than_equal' });
      else if (ms > LATEST) fail(name, `Input should be a time ${TIME_RANGE_TEXT}`, { type: 'less_than_equal' });
      return ms < EARLIEST || ms > LATEST ? undefined : ms;
    },
    limit(): number | undefined {
      const v = values.get('limit');
      if (v === undefined) return undefined;
      if (/^\d{1,4}$/.test(v) && Number(v) >= 1 && Number(v) <= MAX_PAGE) return Number(v);
      fail('limit', `Input should be an integer from 1 to ${MAX_PAGE}`, { type: 'int_parsing' });
      return undefined;
    },
    done() {
      if (issues.length > 0) throw new ValidationFailure(issues);
    },
  };
}

function decodeCursor(value: string, valid: (key: unknown) => boolean): unknown {
  if (!/^[A-Za-z0-9_-]{1,1024}$/.test(value)) return undefined;
  try {
    const key = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown;
    return valid(key) ? key : undefined;
  } catch {
    return undefined;
  }
}

export function encodeCursor(key: unknown): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

const CURSOR_MSG = 'Input should be a next_cursor returned by this endpoint';
// The metering pager decodes cursors as JSON [epoch ms, id]; a forged one must be a 422
// here, not a parse error there.
// Both stores must be able to take the key back: a time a Date holds (PostgreSQL refused
// [1e300, ...] with a 500), strings without NUL and no longer than an id or a name.
const MAX_TIME = 8.64e15;
const keyText = (v: unknown, max: number) => typeof v === 'string' && !v.includes('\u0000') && [...v].length <= max;
// an integer time: the keys are epoch milliseconds (PostgreSQL's bigint refused 1.5 with a 500)
const timeKey = (k: unknown) => Array.isArray(k) && k.length === 2 && Number.isSafeInteger(k[0]) && Math.abs(k[0] as number) <= MAX_TIME && keyText(k[1], MAX_ID_CHARS);
const nameKey = (k: unknown) => Array.isArray(k) && k.length === 2 && keyText(k[0], MAX_NAME_CHARS) && keyText(k[1], MAX_ID_CHARS);

/** Query of GET /admin/api/usage: `from` (inclusive) and `to` (exclusive) are ISO 8601 times,
 * `limit` 1..1000 (default 100), `cursor` the `next_cursor` of the previous page, `order`
 * asc (oldest first, the default) or desc. */
export function parsePageQuery(params: URLSearchParams, known: readonly string[] = PAGE_PARAMS): PageQuery {
  const r = reader(params, known);
  const q: PageQuery = {};
  const { values } = r;
  const tokenId = r.id('token_id');
  if (tokenId !== undefined) q.token_id = tokenId;
  const moduleId = r.moduleId();
  if (moduleId !== undefined) q.module_id = moduleId;
  const from = r.time('from');
  const to = r.time('to');
  if (from !== undefined) q.from = from;
  if (to !== undefined) q.to = to;
  const limit = r.limit();
  if (limit !== undefined) q.limit = limit;
  const order = values.get('order');
  if (order === 'asc' || order === 'desc') q.order = order;
  else if (order !== undefined) r.fail('order', "Input should be 'asc' or 'desc'", { type: 'literal_error' });
  const cursor = values.get('cursor');
  if (cursor !== undefined) {
    if (decodeCursor(cursor, timeKey) === undefined) r.fail('cursor', CURSOR_MSG, { type: 'value_error' });
    else q.cursor = cursor;
  }
  r.done();
  return q;
}

/** GET /admin/api/audit: the usage query plus `status` (an HTTP status such as 429, or a
 * class such as 4xx) and `outcome` (live, non_live, retry, mixed, error). */
export function parseAuditQuery(params: URLSearchParams): { page: PageQuery; where?: (a: AuditRecord) => boolean } {
  let statusIssue: ValidationIssue | undefined;
  let outcomeIssue: ValidationIssue | undefined;
  const status = params.get('status') || undefined;
  const outcome = params.get('outcome') || undefined;
  let statusOk: ((s: number) => boolean) | undefined;
  if (status !== undefined) {
    if (/^[1-5]\d\d$/.test(status)) statusOk = (s) => s === Number(status);
    else if (/^[1-5]xx$/i.test(status)) statusOk = (s) => Math.floor(s / 100) === Number(status[0]);
    else statusIssue = { loc: ['query', 'status'], msg: 'Input should be an HTTP status (100 to 599) or a class such as 4xx', type: 'value_error', input: status.slice(0, 256) };
  }
  if (outcome !== undefined && !(AUDIT_OUTCOMES as readonly string[]).includes(outcome)) {
    outcomeIssue = { loc: ['query', 'outcome'], msg: `Input should be ${AUDIT_OUTCOMES.map((o) => `'${o}'`).join(', ')}`, type: 'literal_error', input: outcome.slice(0, 256) };
  }
  let page: PageQuery;
  try {
    page = parsePageQuery(params, AUDIT_PARAMS);
  } catch (e) {
    if (e instanceof ValidationFailure) throw new ValidationFailure([...e.detail, ...[statusIssue, outcomeIssue].filter((i) => i !== undefined)]);
    throw e;
  }
  if (statusIssue || outcomeIssue) throw new ValidationFailure([statusIssue, outcomeIssue].filter((i) => i !== undefined));
  if (statusOk === undefined && outcome === undefined) return { page };
  return {
    page,
    where: (a) => (statusOk === undefined || statusOk(a.status)) && (outcome === undefined || auditOutcome(a) === outcome),
  };
}

/** Records written before outcomes were kept: an error status is an error; a 200 is unknown. */
export function auditOutcome(a: AuditRecord): AuditOutcome | null {
  return a.outcome ?? (a.status === 200 ? null : 'error');
}

export interface ListQuery {
  q?: string;
  /** tokens only: the name itself (case and Unicode composition ignored, as names are unique) */
  name?: string;
  limit: number;
  after?: [string, string];
}

/** GET /admin/api/tokens and /admin/api/users with `q`, `limit` or `cursor` (and for tokens
 * `name`): a page in name order. Null when none is given: the unpaged list of the contract. */
export function parseListQuery(params: URLSearchParams, { names = false }: { names?: boolean } = {}): ListQuery | null {
  const r = reader(params, names ? ['q', 'name', 'limit', 'cursor'] : ['q', 'limit', 'cursor']);
  if ([...params.keys()].length === 0) return null;
  const out: ListQuery = { limit: r.limit() ?? 100 };
  const q = r.values.get('q');
  if (q !== undefined) {
    if ([...q].length > 200) r.fail('q', 'String should have at most 200 characters', { type: 'string_too_long' });
    else out.q = q;
  }
  if (names) {
    // a name's rules (TokenNameSchema: 1 to 200 characters; the reader refuses NUL), not its
    // format: a name no token can have is found by none. Empty is refused, not taken as
    // absent as an empty q is: "the token named ''" is no filter at all.
    const name = r.values.get('name');
    if (name !== undefined && [...name].length > MAX_NAME_CHARS) r.fail('name', `String should have at most ${MAX_NAME_CHARS} characters`, { type: 'string_too_long' });
    else if (name !== undefined) out.name = name;
    else if (params.getAll('name').includes('')) r.issues.push({ loc: ['query', 'name'], msg: 'String should have at least 1 character', type: 'string_too_short', input: '' });
  }
  const cursor = r.values.get('cursor');
  if (cursor !== undefined) {
    const key = decodeCursor(cursor, nameKey) as [string, string] | undefined;
    if (key === undefined) r.fail('cursor', CURSOR_MSG, { type: 'value_error' });
    else out.after = key;
  }
  r.done();
  return out;
}

export interface DailyQuery {
  fromDay: string;
  toDay: string;
  token_id?: string;
  module_id?: string;
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** GET /admin/api/usage/daily: `from` and `to` (ISO 8601, UTC days; `to` exclusive as in the
 * ledger query) default to the 30 days ending today (UTC). */
export function parseDailyQuery(params: URLSearchParams, nowMs: number): DailyQuery {
  const r = reader(params, ['token_id', 'module_id', 'from', 'to']);
  const tokenId = r.id('token_id');
  const moduleId = r.moduleId();
  const from = r.time('from');
  const to = r.time('to');
  r.done();
  // the last day shown is the one holding the last instant before `to`
  const toDay = dayOf((to ?? Date.UTC(new Date(nowMs).getUTCFullYear(), new Date(nowMs).getUTCMonth(), new Date(nowMs).getUTCDate() + 1)) - 1);
  // the default start stays in range too: the console pages the ledger from it
  const fromDay = dayOf(from ?? Math.max(EARLIEST, Date.parse(`${toDay}T00:00:00Z`) - (DEFAULT_DAYS - 1) * DAY_MS));
  const span = (Date.parse(`${toDay}T00:00:00Z`) - Date.parse(`${fromDay}T00:00:00Z`)) / DAY_MS + 1;
  if (span < 1) throw new ValidationFailure([{ loc: ['query', 'to'], msg: 'Input should be later than from', type: 'value_error', input: params.get('to') ?? '' }]);
  if (span > MAX_DAYS) throw new ValidationFailure([{ loc: ['query', 'from'], msg: `The range should span at most ${MAX_DAYS} days`, type: 'value_error', input: params.get('from') ?? '' }]);
  const out: DailyQuery = { fromDay, toDay };
  if (tokenId !== undefined) out.token_id = tokenId;
  if (moduleId !== undefined) out.module_id = moduleId;
  return out;
}
