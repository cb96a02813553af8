import type { TSchema } from '@sinclair/typebox';
import * as admin from '../admin/schemas.ts';
import { LoginSchema, SessionSchema } from '../auth/schemas.ts';
import { BatchEnvelopeSchema, CapturePacketSchema, FrameSchema, ImageDescriptorSchema, MetadataSchema } from '../packets/schemas.ts';
import * as r from './responses.ts';

// The document is generated from the TypeBox schemas the service validates with, so the
// description cannot drift from the checks. Symbols TypeBox adds are dropped by JSON.

const DESCRIPTION = `Token-authenticated, per-module metered liveness verification.

**Validation errors (422)** use \`{detail: [{loc, msg, type, input?, ctx?}]}\`. \`loc\` is the path to the
offending value: it starts with \`"body"\`; then \`"metadata"\` for the metadata field, followed by the JSON path
inside it (\`["body","metadata","frames",3,"eyes_xy"]\` for a single packet,
\`["body","metadata","captures",0,"frames",3,"eyes_xy"]\` for a batch); an image fault points at the frame's
descriptor (\`[..., "frames", 3, "image"]\`); a multipart part fault names the part
(\`["body", "<part name>"]\`), and a body that is not valid multipart framing is \`["body"]\` with type
\`multipart_invalid\`. All faults of a request are reported at once where that is cheap.

**JSON bodies** (login, admin API) are read as JSON when the Content-Type is absent, \`application/json\` or
\`application/*+json\`; any other type is a 422 at \`["body"]\` with type \`json_type\`.

**Order of checks on verify**: token (401), module exists (404), grant (403 module_forbidden), enabled
(403 module_disabled), capacity slot (503 server_busy, before the body is read), headers and content type
(400, 413, 415), body and inputs (408 request_timeout for an upload below the minimum rate or past its
deadline, 413, 422), idempotency (409), quota (429), inference (200, 500). Capacity is 2 x WORKERS slots
shared by the whole host, with caps per client address and per token (also 503 server_busy).

**Signed verdicts**: when present, the \`X-Verdict-Signature\` header is a detached JWS (EdDSA) over the exact
response body; keys are published at \`/.well-known/jwks.json\`.

**Metrics**: \`/metrics\` answers loopback clients (judged by the client address, X-Forwarded-For included when
the peer is a trusted proxy), and others only with \`Authorization: Bearer <METRICS_TOKEN>\`.`;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const jsonContent = (schema: object) => ({ 'application/json': { schema } });
const err = (description: string) => ({ description, content: jsonContent(ref('ErrorBody')) });
const ok = (schema: object, description = 'OK') => ({ description, content: jsonContent(schema) });
const body = (schema: object) => ({ required: true, content: jsonContent(schema) });
const validation = { description: 'Validation error', content: jsonContent(ref('ValidationErrorBody')) };
const bearer = [{ businessToken: [] }];
const session = [{ adminSession: [] }];
const csrfHeader = { name: 'X-CSRF-Token', in: 'header', required: true, schema: { type: 'string' }, description: 'from /auth/login or /auth/session' };
const pathParam = (name: string, schema: object = { type: 'string' }) => ({ name, in: 'path', required: true, schema });
const retryAfter = { 'Retry-After': { schema: { type: 'integer' }, description: 'seconds' } };
const adminErrors = { '401': err('invalid_session'), '403': err('forbidden or csrf_failed') };
const pageQuery = ['token_id', 'module_id', 'from', 'to', 'cursor', 'limit'].map((name) => ({ name, in: 'query', required: false, schema: { type: 'string' } }));

function strip(schema: TSchema): object {
  return JSON.parse(JSON.stringify(schema));
}

export function buildOpenApi(): object {
  const schemas: Record<string, object> = {
    ErrorBody: strip(r.ErrorBody),
    ValidationErrorBody: strip(r.ValidationErrorBody),
    ImageDescriptor: strip(ImageDescriptorSchema),
    Frame: strip(FrameSchema),
    CapturePacket: strip(CapturePacketSchema),
    BatchEnvelope: strip(BatchEnvelopeSchema),
    Metadata: strip(MetadataSchema),
    UsageRecord: strip(r.UsageRecord),
    ResultRecord: strip(r.ResultRecord),
    VerifyResponse: strip(r.VerifyResponse),
    MeResponse: strip(r.MeResponse),
    ModulesResponse: strip(r.ModulesResponse),
    HealthLive: strip(r.HealthLive),
    HealthReady: strip(r.HealthReady),
    Login: strip(LoginSchema),
    Session: strip(SessionSchema),
    AdminModule: strip(r.AdminModule),
    ModulePatch: strip(admin.ModulePatchSchema),
    User: strip(r.User),
    UserCreate: strip(admin.UserCreateSchema),
    UserPatch: strip(admin.UserPatchSchema),
    Token: strip(r.Token),
    TokenDetail: strip(r.TokenDetail),
    TokenCreated: strip(r.TokenCreated),
    TokenCreate: strip(admin.TokenCreateSchema),
    TokenPatch: strip(admin.TokenPatchSchema),
    Grant: strip(admin.GrantSchema),
    GrantBody: strip(admin.GrantBodySchema),
    LedgerPage: strip(r.Page(r.LedgerEntry)),
    AuditPage: strip(r.Page(r.AuditRecord)),
    Settlement: strip(r.Settlement),
    SettlementResolve: strip(admin.SettlementResolveSchema),
  };

  const moduleParam = pathParam('module_id', { type: 'string', enum: ['rgb_liveness', 'color_liveness'] });
  const paths: Record<string, object> = {
    '/health/live': { get: { summary: 'Process liveness', responses: { '200': ok(ref('HealthLive')) } } },
    '/health/ready': {
      get: { summary: 'Model readiness', responses: { '200': ok(ref('HealthReady')), '503': ok(ref('HealthReady'), 'Not ready') } },
    },
    '/v1/me': {
      get: { summary: 'Current token and its usage; not metered', security: bearer, responses: { '200': ok(ref('MeResponse')), '401': err('invalid_token') } },
    },
    '/v1/modules': {
      get: { summary: 'Modules granted to the token and their status; not metered', security: bearer, responses: { '200': ok(ref('ModulesResponse')), '401': err('invalid_token') } },
    },
    '/v1/modules/{module_id}/verify': {
      post: {
        summary: 'Verify one capture or a batch',
        security: bearer,
        parameters: [
          moduleParam,
          { name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[!-~]+$' } },
        ],
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['metadata'],
                properties: { metadata: { type: 'string', description: 'JSON text: one CapturePacket or {captures:[...]} (schema Metadata); no filename' } },
                additionalProperties: { type: 'string', contentEncoding: 'binary', description: 'one file part per image.part (png or rgb8), at most 1 MiB each' },
              },
              encoding: { metadata: { contentType: 'application/json, text/plain' } },
            },
          },
        },
        responses: {
          '200': {
            description: 'Verification results (HTTP 200 alone is not a liveness verdict: read status and alive)',
            headers: {
              'X-Request-ID': { schema: { type: 'string' } },
              'Idempotency-Replayed': { schema: { type: 'string', enum: ['true'] } },
              'X-Verdict-Signature': { schema: { type: 'string' }, description: 'detached JWS (EdDSA) over the body' },
            },
            content: jsonContent(ref('VerifyResponse')),
          },
          '400': err('invalid_idempotency_key or invalid_content_length'),
          '401': err('invalid_token'),
          '403': err('module_forbidden or module_disabled'),
          '404': err('module_not_found'),
          '408': err('request_timeout: the upload fell below UPLOAD_MIN_BYTES_PER_SECOND over UPLOAD_RATE_WINDOW_SECONDS, or outlived UPLOAD_DEADLINE_SECONDS; nothing charged, the key not bound; retry with the same key'),
          '409': { ...err('request_in_progress or idempotency_conflict'), headers: retryAfter },
          '413': err('payload_too_large'),
          '415': err('unsupported_media_type'),
          '422': { ...validation, description: 'Validation error (invalid_input): metadata, ordering, geometry, parts, image bytes or hashes, or a body that is not valid multipart framing (loc ["body"], type multipart_invalid)' },
          '429': { ...err('quota_exceeded'), headers: retryAfter },
          '500': err('inference_failed, settlement_failed or internal_error'),
          '503': { ...err('server_busy or module_unavailable'), headers: retryAfter },
        },
      },
    },
    '/auth/login': {
      post: { summary: 'Administrator login', requestBody: body(ref('Login')), responses: { '200': ok(ref('Session')), '401': err('invalid_credentials'), '403': err('login_disabled'), '422': validation, '429': err('too_many_attempts') } },
    },
    '/auth/session': { get: { summary: 'Current session', security: session, responses: { '200': ok(ref('Session')), '401': err('invalid_session') } } },
    '/auth/logout': { post: { summary: 'End the session', security: session, parameters: [csrfHeader], responses: { '204': { description: 'Logged out' }, ...adminErrors } } },
    '/admin': { get: { summary: 'Administration console (HTML)', responses: { '200': { description: 'console', content: { 'text/html': { schema: { type: 'string' } } } } } } },
    '/admin/api/modules': { get: { summary: 'Modules', security: session, responses: { '200': ok({ type: 'object', properties: { modules: { type: 'array', items: ref('AdminModule') } } }), ...adminErrors } } },
    '/admin/api/modules/{module_id}': {
      patch: { summary: 'Enable or disable a module', security: session, parameters: [moduleParam, csrfHeader], requestBody: body(ref('ModulePatch')), responses: { '200': ok(ref('AdminModule')), ...adminErrors, '404': err('not_found'), '422': validation } },
    },
    '/admin/api/users': {
      get: { summary: 'Users', security: session, responses: { '200': ok({ type: 'object', properties: { users: { type: 'array', items: ref('User') } } }), ...adminErrors } },
      post: { summary: 'Create a user', security: session, parameters: [csrfHeader], requestBody: body(ref('UserCreate')), responses: { '201': ok(ref('User')), ...adminErrors, '409': err('conflict'), '422': validation } },
    },
    '/admin/api/users/{id}': {
      patch: { summary: 'Change a user', security: session, parameters: [pathParam('id'), csrfHeader], requestBody: body(ref('UserPatch')), responses: { '200': ok(ref('User')), ...adminErrors, '404': err('not_found'), '409': err('conflict: would leave no enabled admin'), '422': validation } },
    },
    '/admin/api/tokens': {
      get: { summary: 'Tokens (never the plaintext)', security: session, responses: { '200': ok({ type: 'object', properties: { tokens: { type: 'array', items: ref('Token') } } }), ...adminErrors } },
      post: { summary: 'Create a token; the plaintext is in this response only', security: session, parameters: [csrfHeader], requestBody: body(ref('TokenCreate')), responses: { '201': ok(ref('TokenCreated')), ...adminErrors, '422': validation } },
    },
    '/admin/api/tokens/{id}': {
      get: { summary: 'One token with grants and usage', security: session, parameters: [pathParam('id')], responses: { '200': ok(ref('TokenDetail')), ...adminErrors, '404': err('not_found') } },
      patch: { summary: 'Change a token', security: session, parameters: [pathParam('id'), csrfHeader], requestBody: body(ref('TokenPatch')), responses: { '200': ok(ref('Token')), ...adminErrors, '404': err('not_found'), '409': err('conflict: a revoked token cannot be enabled'), '422': validation } },
      delete: { summary: 'Revoke a token for good', security: session, parameters: [pathParam('id'), csrfHeader], responses: { '204': { description: 'Revoked' }, ...adminErrors, '404': err('not_found') } },
    },
    '/admin/api/tokens/{id}/grants/{module_id}': {
      put: { summary: 'Create or change a grant (usage of the current period is kept)', security: session, parameters: [pathParam('id'), moduleParam, csrfHeader], requestBody: body(ref('GrantBody')), responses: { '200': ok(ref('Grant')), ...adminErrors, '404': err('not_found'), '422': validation } },
      delete: { summary: 'Remove a grant (a later re-grant keeps the period\'s usage)', security: session, parameters: [pathParam('id'), moduleParam, csrfHeader], responses: { '204': { description: 'Removed' }, ...adminErrors, '404': err('not_found') } },
    },
    '/admin/api/usage': { get: { summary: 'Usage ledger, paged', security: session, parameters: pageQuery, responses: { '200': ok(ref('LedgerPage')), ...adminErrors, '422': validation } } },
    '/admin/api/audit': { get: { summary: 'Request audit records, paged', security: session, parameters: pageQuery, responses: { '200': ok(ref('AuditPage')), ...adminErrors, '422': validation } } },
    '/admin/api/settlements': { get: { summary: 'Pending settlements needing operator recovery', security: session, responses: { '200': ok({ type: 'object', properties: { settlements: { type: 'array', items: ref('Settlement') } } }), ...adminErrors } } },
    '/admin/api/settlements/{id}/resolve': {
      post: { summary: 'Charge or refund a pending settlement', security: session, parameters: [pathParam('id'), csrfHeader], requestBody: body(ref('SettlementResolve')), responses: { '200': ok(ref('Settlement')), ...adminErrors, '404': err('not_found'), '409': err('conflict: not pending'), '422': validation } },
    },
    '/.well-known/jwks.json': { get: { summary: 'Public keys for verdict signatures', responses: { '200': ok({ type: 'object', properties: { keys: { type: 'array', items: { type: 'object' } } } }) } } },
    '/openapi.json': { get: { summary: 'This document', responses: { '200': ok({ type: 'object' }) } } },
    '/metrics': { get: { summary: 'Prometheus metrics (loopback, or Bearer METRICS_TOKEN)', responses: { '200': { description: 'text exposition format', content: { 'text/plain': { schema: { type: 'string' } } } } } } },
  };

  return {
    openapi: '3.1.0',
    info: { title: 'Algorithm Service', version: '0.5.1', description: DESCRIPTION },
    servers: [{ url: '/', description: 'the reachable {base_url}; HTTPS in production' }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        businessToken: { type: 'http', scheme: 'bearer', description: 'business token (lvk_...), /v1 only' },
        adminSession: { type: 'apiKey', in: 'cookie', name: 'lv_session', description: 'administrator session cookie (<COOKIE_PREFIX>_session)' },
      },
    },
  };
}
