// The administration API (contract.md "Administration API") and the console's static files.
// Every /admin/api operation needs an admin session (invalid_session, forbidden are added by
// document.ts); `csrf: true` marks the state-changing ones.

import { Type } from '@sinclair/typebox';
import { DEFAULT_DAYS, MAX_DAYS, MAX_ID_CHARS, TIME_RANGE_TEXT, CONSOLE_TYPES } from '../admin/index.ts';
import * as ex from './examples.ts';
import { moduleIdParam, pathParam, retryAfter, type Operation, type ParameterSpec } from './operation.ts';

// ids are short and hold no NUL; another names nothing (404 in the path, 422 as token_id)
const NO_NUL = '^[^\\u0000]*$';
const idSchema = { type: 'string', minLength: 1, maxLength: MAX_ID_CHARS, pattern: NO_NUL };
const STATIC_TYPES = [...new Set(Object.values(CONSOLE_TYPES).map((t) => t.split(';')[0]!))];

const tokenId = pathParam('id', ex.token.id, idSchema, 'token id');
const userId = pathParam('id', ex.user.id, idSchema, 'user id');
const settlementId = pathParam('id', ex.settlement.id, idSchema, 'reservation id from the settlements list');

const query = (name: string, example: unknown, description: string, schema: object = { type: 'string' }): ParameterSpec =>
  ({ name, in: 'query', required: false, schema, example, description });
// What the query parser (src/admin/page-query.ts) accepts, said so that a generic tool can
// follow it: a time or a day, with a four-digit year from 2000 (the instant itself must lie in
// TIME_RANGE_TEXT, which a pattern cannot check across offsets); a cursor is base64url text.
const timeSchema = {
  anyOf: [
    { type: 'string', format: 'date-time', pattern: '^[2-9][0-9]{3}-' },
    { type: 'string', format: 'date', pattern: '^[2-9][0-9]{3}-' },
  ],
};
const cursorSchema = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,1024}$' };
const pageQuery: ParameterSpec[] = [
  query('token_id', ex.token.id, 'only this token', idSchema),
  query('module_id', 'rgb_liveness', 'only this module', { $ref: '#/components/schemas/ModuleId' }),
  query('from', '2026-11-01T00:00:00Z', `ISO 8601 time or UTC day, inclusive; ${TIME_RANGE_TEXT}`, timeSchema),
  query('to', '2026-12-01T00:00:00Z', `ISO 8601 time or UTC day, exclusive; ${TIME_RANGE_TEXT}`, timeSchema),
  query('cursor', ex.ledgerCursor, 'next_cursor of the previous page, as returned (opaque)', cursorSchema),
  query('limit', 100, 'page size, 1 to 1000 (default 100)', { type: 'integer', minimum: 1, maximum: 1000 }),
  query('order', 'desc', 'time order: asc oldest first (default), desc newest first', { type: 'string', enum: ['asc', 'desc'] }),
];
const auditQuery: ParameterSpec[] = [
  ...pageQuery,
  query('status', '4xx', 'an HTTP status (429) or a class (4xx)', { type: 'string', pattern: '^[1-5]([0-9]{2}|xx)$' }),
  query('outcome', 'retry', 'what the call decided', { type: 'string', enum: ['live', 'non_live', 'retry', 'mixed', 'error'] }),
];
const listQuery = (what: string, filters: ParameterSpec[] = []): ParameterSpec[] => [
  query('q', 'kiosk', what, { type: 'string', maxLength: 200, pattern: NO_NUL }),
  ...filters,
  query('limit', 100, 'page size, 1 to 1000 (default 100)', { type: 'integer', minimum: 1, maximum: 1000 }),
  query('cursor', ex.nameCursor, 'next_cursor of the previous page, as returned (opaque)', cursorSchema),
];

export const ADMIN_OPERATIONS: Operation[] = [
  {
    method: 'get', path: '/admin', operationId: 'getConsole', tag: 'admin', auth: 'none',
    summary: 'Administration console (HTML; logs in through /auth/login)',
    success: { status: '200', description: 'The console page', contentType: 'text/html', schema: Type.String(), example: '<!doctype html>...' },
    errors: [],
  },
  {
    method: 'get', path: '/admin/static/{file}', operationId: 'getConsoleFile', tag: 'admin', auth: 'none',
    summary: 'Static file of the console (script or style sheet)',
    parameters: [pathParam('file', 'app.js')],
    // every type the route serves, from the route's own table (scripts are text/javascript, RFC 9239)
    success: { status: '200', description: 'The file: a script, the style sheet or the page', contentType: STATIC_TYPES, schema: Type.String(), example: '/* the file as it is in src/admin/console */' },
    errors: ['not_found'],
  },
  {
    method: 'get', path: '/admin/api/modules', operationId: 'adminListModules', tag: 'admin', auth: 'session',
    summary: 'Modules with readiness and decision policy',
    success: { status: '200', description: 'All modules', schema: 'AdminModuleList', example: { modules: [ex.adminModule] } },
    errors: [],
  },
  {
    method: 'patch', path: '/admin/api/modules/{module_id}', operationId: 'adminPatchModule', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Enable or disable a module',
    parameters: [moduleIdParam],
    body: { schema: 'ModulePatch', example: { enabled: false } },
    success: { status: '200', description: 'The module', schema: 'AdminModule', example: { ...ex.adminModule, enabled: false } },
    errors: ['not_found'],
    validation: { example: { detail: [{ loc: ['body', 'enabled'], msg: 'Input should be a valid boolean', type: 'bool_type', input: 'no' }] } },
  },
  {
    method: 'get', path: '/admin/api/model-set', operationId: 'adminGetModelSet', tag: 'admin', auth: 'session',
    summary: 'Model set served now, one being activated, the last activation and the sets in MODELS_DIR',
    success: {
      status: '200', description: 'Model-set state of this node',
      schema: Type.Object({
        active: Type.String(),
        activating: Type.Union([Type.String(), Type.Null()]),
        last: Type.Union([Type.Object({ model_set: Type.String(), outcome: Type.Union([Type.Literal('active'), Type.Literal('unchanged'), Type.Literal('refused')]), reason: Type.Union([Type.String(), Type.Null()]), at: Type.String({ format: 'date-time' }) }), Type.Null()]),
        last_request_id: Type.Union([Type.String(), Type.Null()]),
        available: Type.Array(Type.String()),
      }),
      example: { active: 'raw_v1', activating: null, last: null, last_request_id: null, available: ['bgr80_ensemble_v1', 'raw_v1'] },
    },
    errors: [],
  },
  {
    method: 'get', path: '/admin/api/model-sets', operationId: 'adminListModelSets', tag: 'admin', auth: 'session',
    summary: 'Every model set in MODELS_DIR: whether its manifest says it is trained, its graphs and modes, and its last calibration report (models calibrate)',
    success: { status: '200', description: 'The model sets of this node', schema: 'ModelSetList', example: ex.modelSets },
    errors: [],
  },
  {
    method: 'get', path: '/admin/api/model-sets/{id}/det.svg', operationId: 'adminModelSetDetPlot', tag: 'admin', auth: 'session',
    summary: "The DET plot of a model set's last calibration (SVG)",
    parameters: [pathParam('id', 'raw_v1', { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }, 'model set name')],
    success: { status: '200', description: 'The plot', contentType: 'image/svg+xml', schema: Type.String(), example: '<svg xmlns="http://www.w3.org/2000/svg">...</svg>' },
    errors: ['not_found'],
  },
  {
    method: 'get', path: '/admin/api/results/{id}', operationId: 'adminGetResults', tag: 'admin', auth: 'session',
    summary: "A charged verify call's result records (kept RETENTION_RESULTS_DAYS), by request id: the audit row's detail",
    parameters: [pathParam('id', ex.storedResults.request_id, idSchema, 'request id from the audit log')],
    success: { status: '200', description: 'The results', schema: 'StoredResults', example: ex.storedResults },
    errors: ['not_found'],
  },
  {
    method: 'post', path: '/admin/api/model-set', operationId: 'adminActivateModelSet', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Activate another model set live (kept across restarts)',
    description: 'The set loads, is checked against its graphs and warms beside the serving set (within MODEL_LOAD_TIMEOUT_SECONDS); then calls switch atomically and in-flight calls finish on the old set. A set that fails, or that would leave an enabled module unready (disable the module first), is refused and the old set keeps serving (see GET). A restart serves the activated set again while MODEL_SET is unchanged. Per node.',
    body: { schema: Type.Object({ model_set: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }) }, { additionalProperties: false }), example: { model_set: 'bgr80_ensemble_v1' } },
    success: {
      status: '202', description: 'Activation requested',
      schema: Type.Object({ request_id: Type.String(), model_set: Type.String(), requested_at: Type.String({ format: 'date-time' }) }),
      example: { request_id: 'msr_01', model_set: 'bgr80_ensemble_v1', requested_at: '2026-11-23T10:00:00.000Z' },
    },
    errors: ['not_found'],
    validation: { example: ex.jsonValidation },
  },
  {
    method: 'get', path: '/admin/api/users', operationId: 'adminListUsers', tag: 'admin', auth: 'session',
    summary: 'Users; with q, limit or cursor a page in username order',
    parameters: listQuery('matches the username (substring, case ignored) or the id (from its start)'),
    success: { status: '200', description: 'All users, or one page', schema: 'UserList', example: { users: [ex.user] } },
    errors: [],
    validation: { example: ex.queryValidation },
  },
  {
    method: 'post', path: '/admin/api/users', operationId: 'adminCreateUser', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Create a user',
    description: 'Creating an admin (`role: admin`) needs `current_password`, the calling operator\'s own password, checked '
      + 'under the login throttle: missing 422, wrong 403 invalid_current_password, too many wrong 429 too_many_attempts; '
      + 'nothing is created then. A stolen session alone cannot make itself an account. Each creation is logged with the '
      + 'acting operator and client address.',
    body: { schema: 'UserCreate', example: { username: 'operator', password: 'a-long-password', role: 'admin', current_password: 'correct horse battery' } },
    success: { status: '201', description: 'Created', schema: 'User', example: ex.user },
    errors: ['invalid_current_password', 'conflict', 'too_many_attempts', 'server_busy'],
    validation: { example: { detail: [{ loc: ['body', 'current_password'], msg: 'Field required', type: 'missing' }] } },
    errorHeaders: { '429': retryAfter, '503': retryAfter },
  },
  {
    method: 'patch', path: '/admin/api/users/{id}', operationId: 'adminPatchUser', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Change a user (a changed password or a disabled account ends their sessions)',
    description: 'A new `password` (for any user, the caller included), and any change of `role` or `enabled` that gives '
      + 'or takes admin access (promoting a user, demoting, disabling or enabling an admin), need `current_password`, the '
      + 'calling operator\'s own password, checked under the login throttle: missing 422, wrong 403 invalid_current_password, '
      + 'too many wrong 429 too_many_attempts; nothing is changed then. A stolen session alone cannot take an account, make '
      + 'one or lock the other operators out. Each such change is logged with the acting operator and client address.',
    parameters: [userId],
    body: { schema: 'UserPatch', example: { password: 'a-new-long-password', current_password: 'correct horse battery' } },
    success: { status: '200', description: 'The user', schema: 'User', example: ex.user },
    errors: ['not_found', 'invalid_current_password', 'conflict', 'too_many_attempts', 'server_busy'],
    validation: { example: { detail: [{ loc: ['body', 'current_password'], msg: 'Field required', type: 'missing' }] } },
    errorHeaders: { '429': retryAfter, '503': retryAfter },
  },
  {
    method: 'get', path: '/admin/api/tokens', operationId: 'adminListTokens', tag: 'admin', auth: 'session',
    summary: 'Tokens (never the plaintext); with q, name, limit or cursor a page in name order',
    parameters: listQuery('matches the name (substring, case ignored), the token prefix or the id (from their start)', [
      query('name', 'Kiosk-17', 'only the token of this name, compared as names are kept unique (case and Unicode composition ignored, nothing else: no trimming, no substring); with q, tokens matching both. Names are unique, so a page holds it or nothing, unless the store kept duplicates written before names were unique', { type: 'string', minLength: 1, maxLength: 200, pattern: NO_NUL }),
    ]),
    success: { status: '200', description: 'All tokens, or one page', schema: 'TokenList', example: { tokens: [ex.token] } },
    errors: [],
    validation: { example: ex.queryValidation },
  },
  {
    method: 'post', path: '/admin/api/tokens', operationId: 'adminCreateToken', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Create a token; the plaintext is in this response only',
    description: 'Each module may be granted once: a second grant of the same module in `grants` is a 422 (value_error at its module_id).',
    body: { schema: 'TokenCreate', example: { name: 'kiosk-17', grants: [ex.grant] } },
    success: { status: '201', description: 'Created, with the plaintext token', schema: 'TokenCreated', example: ex.tokenCreated },
    errors: ['conflict'],
    validation: { example: ex.jsonValidation },
  },
  {
    method: 'get', path: '/admin/api/tokens/{id}', operationId: 'adminGetToken', tag: 'admin', auth: 'session',
    summary: 'One token with grants and usage',
    parameters: [tokenId],
    success: { status: '200', description: 'The token', schema: 'TokenDetail', example: ex.tokenDetail },
    errors: ['not_found'],
  },
  {
    method: 'patch', path: '/admin/api/tokens/{id}', operationId: 'adminPatchToken', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Change a token (a revoked token cannot be enabled: 409)',
    description: 'Disabling the token, or setting an `expires_at` already past, ends its device sessions for good: enabling it '
      + 'again (or moving `expires_at` on) brings none back; the backend mints new ones.',
    parameters: [tokenId],
    body: { schema: 'TokenPatch', example: { enabled: false } },
    success: { status: '200', description: 'The token', schema: 'Token', example: { ...ex.token, enabled: false } },
    errors: ['not_found', 'conflict'],
    validation: { example: ex.jsonValidation },
  },
  {
    method: 'delete', path: '/admin/api/tokens/{id}', operationId: 'adminRevokeToken', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Revoke a token for good',
    parameters: [tokenId],
    success: { status: '204', description: 'Revoked' },
    errors: ['not_found'],
  },
  {
    method: 'put', path: '/admin/api/tokens/{id}/grants/{module_id}', operationId: 'adminSetGrant', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Create or change a grant (usage of the current period is kept)',
    parameters: [tokenId, moduleIdParam],
    body: { schema: 'GrantBody', example: { limit: 1000, period: 'day' } },
    success: { status: '200', description: 'The grant', schema: 'Grant', example: ex.grant },
    errors: ['not_found'],
    validation: { example: { detail: [{ loc: ['body', 'period'], msg: "Input should be 'day', 'month' or 'never'", type: 'literal_error', input: 'week' }] } },
  },
  {
    method: 'delete', path: '/admin/api/tokens/{id}/grants/{module_id}', operationId: 'adminRemoveGrant', tag: 'admin', auth: 'session', csrf: true,
    summary: "Remove a grant (a later re-grant keeps the period's usage)",
    parameters: [tokenId, moduleIdParam],
    success: { status: '204', description: 'Removed' },
    errors: ['not_found'],
  },
  {
    method: 'get', path: '/admin/api/usage', operationId: 'adminListLedger', tag: 'admin', auth: 'session',
    summary: 'Usage ledger, paged',
    parameters: pageQuery,
    success: { status: '200', description: 'One page', schema: 'LedgerPage', example: ex.ledgerPage },
    errors: [],
    validation: { example: ex.queryValidation },
  },
  {
    method: 'get', path: '/admin/api/usage/daily', operationId: 'adminUsageDaily', tag: 'admin', auth: 'session',
    summary: 'Units per UTC day over a range, every day listed',
    description: `The range is from \`from\` to \`to\`, at most ${MAX_DAYS} days; without them, the ${DEFAULT_DAYS} days ending today (UTC).`,
    parameters: [
      ...pageQuery.filter((p) => ['token_id', 'module_id'].includes(p.name)),
      query('from', '2026-11-01T00:00:00Z', `ISO 8601 time or UTC day, inclusive; ${TIME_RANGE_TEXT}; the range spans at most ${MAX_DAYS} days (422 beyond); default ${DEFAULT_DAYS - 1} days before the last day`, timeSchema),
      query('to', '2026-12-01T00:00:00Z', `ISO 8601 time or UTC day, exclusive; ${TIME_RANGE_TEXT}; must be later than \`from\` (422 otherwise); default the end of today (UTC)`, timeSchema),
    ],
    success: {
      status: '200', description: 'Daily totals', schema: 'UsageDaily',
      example: { from: '2026-11-22', to: '2026-11-23', days: [{ day: '2026-11-22', charged: 3, refunded: 1, units: 2 }, { day: '2026-11-23', charged: 1, refunded: 0, units: 1 }], total: 3 },
    },
    errors: [],
    validation: { example: ex.queryValidation },
  },
  {
    method: 'get', path: '/admin/api/audit', operationId: 'adminListAudit', tag: 'admin', auth: 'session',
    summary: 'Request audit records, paged, with status and outcome filters',
    parameters: auditQuery,
    success: { status: '200', description: 'One page', schema: 'AuditPage', example: ex.auditPage },
    errors: [],
    validation: { example: ex.queryValidation },
  },
  {
    method: 'get', path: '/admin/api/overview', operationId: 'adminOverview', tag: 'admin', auth: 'session',
    summary: 'The console overview: verify calls per minute (last hour) and per hour (last day) by answer class and verdict, slots, models, settlements waiting, grants at 80 % or more of their limit',
    success: { status: '200', description: 'The overview', schema: 'Overview', example: ex.overview },
    errors: [],
  },
  {
    method: 'get', path: '/admin/api/settlements', operationId: 'adminListSettlements', tag: 'admin', auth: 'session',
    summary: 'Settlements needing operator recovery',
    success: { status: '200', description: 'Pending settlements', schema: 'SettlementList', example: { settlements: [ex.settlement] } },
    errors: [],
  },
  {
    method: 'post', path: '/admin/api/settlements/{id}/resolve', operationId: 'adminResolveSettlement', tag: 'admin', auth: 'session', csrf: true,
    summary: 'Charge or refund a settlement that failed',
    description: 'charge: the units stay, and the answer that could not be saved (has_saved_answer) completes the idempotency key (the retry replays it) and its results are stored (GET /v1/sessions/{id}, GET /admin/api/results/{id}); without a saved answer the key is released. refund: the units come back and the key is released.',
    parameters: [settlementId],
    body: { schema: 'SettlementResolve', example: { action: 'refund' } },
    success: { status: '200', description: 'The resolved settlement', schema: 'Settlement', example: { ...ex.settlement, state: 'refunded' } },
    errors: ['not_found', 'conflict'],
    validation: { example: { detail: [{ loc: ['body', 'action'], msg: "Input should be 'charge' or 'refund'", type: 'literal_error', input: 'undo' }] } },
  },
];
