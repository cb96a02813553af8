import { Type } from '@sinclair/typebox';
import { BEARER_CHALLENGE, ERRORS, type ErrorCode } from '../errors/index.ts';
import { ADMIN_OPERATIONS } from './admin-operations.ts';
import { COMPONENTS } from './components.ts';
import { REQUEST_ID } from './examples.ts';
import { referenceComponents, toJsonSchema, type JsonSchema } from './json-schema.ts';
import { retryAfter, type Operation, type SchemaUse } from './operation.ts';
import { OPERATIONS } from './operations.ts';
import { SESSION_OPERATIONS } from './session-operations.ts';
import { ErrorBodyOf } from './responses.ts';
import { SERVICE_VERSION } from '../version.ts';

// The document is generated from the TypeBox schemas the service validates with, the error
// catalogue (src/errors/codes.ts) and the 422 issue catalogue, so the description cannot
// drift from the checks. Each operation is one entry in operations.ts / admin-operations.ts.

const DESCRIPTION = `Token-authenticated, per-module metered liveness verification.

**Validation errors (422)** use \`{detail: [{loc, msg, type, input?, ctx?}]}\`. \`loc\` is the path to the
offending value: it starts with \`"body"\`; then \`"metadata"\` for the metadata field, followed by the JSON path
inside it (\`["body","metadata","frames",3,"eyes_xy"]\` for a single packet,
\`["body","metadata","captures",0,"frames",3,"eyes_xy"]\` for a batch); an image fault points at the frame's
descriptor (\`[..., "frames", 3, "image"]\`); a multipart part fault names the part
(\`["body", "<part name>"]\`), and a body that is not valid multipart framing is \`["body"]\` with type
\`multipart_invalid\`. All faults of a request are reported at once where that is cheap.

**HTTP methods**: only GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE and CONNECT (upper case) reach the
service; the HTTP parser closes the connection of a request with any other method (QUERY, PROPFIND, lower-case
names) without an answer. A listed method that a path does not serve is 405 \`method_not_allowed\` with Allow.

**JSON bodies** (login, admin API) are read as JSON when the Content-Type is absent, \`application/json\` or
\`application/*+json\`; any other type is a 422 at \`["body"]\` with type \`json_type\`. A JSON body may be
64 KiB (4 KiB for POST /v1/sessions); a larger one is 413 \`payload_too_large\`, refused from its Content-Length
before it is read, and a malformed or repeated Content-Length is 400 \`invalid_content_length\`.

**Busy**: any operation but the health probes may answer 503 \`server_busy\` with Retry-After: a client address
holding CONNECTIONS_PER_ADDRESS requests in progress on one API worker (the answer also closes the connection),
or, on the admin and auth routes, a store that does not answer. /health/live and /health/ready without a body are
never refused so.

**Order of checks on verify**: token (401), module exists (404), grant (403 module_forbidden), enabled
(403 module_disabled), capacity slot (503 server_busy, before the body is read), headers and content type
(400, 413, 415), body and inputs (408 request_timeout for an upload below the minimum rate or past its
deadline, 413, 422), idempotency (409), quota (429), inference (200, 500). Capacity is 2 x WORKERS slots
(VERIFY_SLOTS when an operator sets it) shared by the whole host, with caps per client address and per token (also 503 server_busy). A verify answer
may come with \`Connection: close\` when its API worker holds more than its share of the host's connections; the
answer is complete, and the client's next request opens a new connection.

**Device sessions**: a backend mints a short-lived session token (\`lvs_...\`) for one module with POST /v1/sessions and hands it
to the device, which uses it as its Bearer token for that module's verify and GET /v1/me only (any other call: 401 or 403). Its captures
charge the business token's quota and count against the session's \`max_captures\` in the same reservation (past it: 429
\`session_captures_exceeded\`, nothing charged); Idempotency-Keys belong to the business token. The backend reads each verify's
results with GET /v1/sessions/{session_id}. Revoking, disabling or expiring the business token ends its sessions at once.

**Signed verdicts**: when present, the \`X-Verdict-Signature\` header is a detached JWS (EdDSA) over the exact
response body; keys are published at \`/.well-known/jwks.json\`.

**CORS**: with \`CORS_ORIGINS\` set, the listed origins may call \`/v1\` from a browser (preflight answered, \`traceparent\` and \`tracestate\` allowed\nbesides \`Authorization\`, \`Idempotency-Key\` and \`Content-Type\`; \`X-Request-ID\`, \`Idempotency-Replayed\`, \`Retry-After\`,\n\`X-Verdict-Signature\`, \`traceparent\` and \`tracestate\` exposed). \`/admin\` and \`/auth\` never answer cross-origin.\n\n**Metrics**: \`/metrics\` answers loopback clients (judged by the client address, X-Forwarded-For included when\nthe peer is a trusted proxy), and others only with \`Authorization: Bearer <METRICS_TOKEN>\`.`;


const TAGS = [
  { name: 'business', description: 'Verification with a business token (Authorization: Bearer lvk_...), or on a device with a session token (lvs_...) minted by POST /v1/sessions' },
  { name: 'health', description: 'Liveness and readiness probes' },
  { name: 'auth', description: 'Administrator sessions' },
  { name: 'admin', description: 'Administration API and console; admin session, X-CSRF-Token on state-changing calls' },
  { name: 'meta', description: 'Keys, this document, metrics' },
];

const SECURITY = { none: [], bearer: [{ businessToken: [] }], session: [{ adminSession: [] }], bearerOrDevice: [{ businessToken: [] }, { sessionToken: [] }] } as const;
const csrfHeader = {
  name: 'X-CSRF-Token', in: 'header', required: true, schema: { type: 'string' },
  description: 'csrf_token from /auth/login or /auth/session', example: 'c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6',
};
const requestIdHeader = { 'X-Request-ID': { $ref: '#/components/headers/X-Request-ID' } };
const bearerChallenge = { 'WWW-Authenticate': { schema: { type: 'string', enum: [BEARER_CHALLENGE] }, description: 'the scheme a 401 for a Bearer token wants (RFC 9110)' } };

function schemaOf(use: SchemaUse): JsonSchema {
  return typeof use === 'string' ? { $ref: `#/components/schemas/${use}` } : toJsonSchema(use);
}

/** One response per status, listing its codes as an enum, with one example per code. */
function errorResponses(op: Operation): Record<string, object> {
  const codes: ErrorCode[] = [...op.errors];
  // any route but the health probes: an address past CONNECTIONS_PER_ADDRESS (src/http/app.ts),
  // a store that does not answer (the admin and auth routes)
  if (op.tag !== 'health') codes.push('server_busy');
  // every JSON body is read against a size limit, with its Content-Length checked first
  if (op.body) codes.push('invalid_content_length', 'payload_too_large');
  if (op.auth === 'session') codes.push('invalid_session');
  if (op.tag === 'admin' && op.auth === 'session') codes.push('forbidden');
  if (op.csrf) codes.push('csrf_failed');
  codes.push('internal_error');
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERRORS[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, object> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: list.join(', '),
      headers: {
        ...requestIdHeader,
        ...(status === 503 && list.includes('server_busy') ? retryAfter : {}),
        ...(status === 401 && (list.includes('invalid_token') || list.includes('invalid_session_token')) ? bearerChallenge : {}),
        ...op.errorHeaders?.[String(status)],
      },
      content: {
        'application/json': {
          // ErrorBody with `code` narrowed to this status's codes
          schema: toJsonSchema(ErrorBodyOf(Type.Unsafe<string>({ type: 'string', enum: list }))),
          examples: Object.fromEntries(list.map((code) => [code, {
            summary: code,
            value: { error: { code, message: ERRORS[code].message }, request_id: REQUEST_ID },
          }])),
        },
      },
    };
  }
  return out;
}

function operationObject(op: Operation): object {
  const parameters: object[] = [...(op.parameters ?? [])];
  if (op.csrf) parameters.push(csrfHeader);
  const success = op.success;
  const responses: Record<string, object> = {
    [success.status]: {
      description: success.description,
      headers: { ...requestIdHeader, ...success.headers },
      ...(success.schema === undefined ? {} : {
        content: Object.fromEntries([success.contentType ?? 'application/json'].flat()
          .map((type) => [type, { schema: schemaOf(success.schema!), example: success.example }])),
      }),
    },
    ...op.extraResponses,
    ...errorResponses(op),
    // what any path can answer besides the listed (a wrong method is 405 with Allow)
    default: {
      description: 'Any other error, in the common error body',
      headers: requestIdHeader,
      content: {
        'application/json': {
          schema: { $ref: '#/components/schemas/ErrorBody' },
          example: { error: { code: 'method_not_allowed', message: ERRORS.method_not_allowed.message }, request_id: REQUEST_ID },
        },
      },
    },
  };
  if (op.validation) {
    responses['422'] = {
      description: op.validation.description ?? 'Validation error (invalid_input)',
      headers: { ...requestIdHeader, ...op.errorHeaders?.['422'] },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ValidationErrorBody' }, example: op.validation.example } },
    };
  }
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security: SECURITY[op.auth],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(op.body.schema), example: op.body.example } } } } : {}),
    ...(op.rawBody ? { requestBody: op.rawBody } : {}),
    responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b))),
  };
}

export function buildOpenApi(): object {
  const plain: Record<string, JsonSchema> = {};
  for (const [name, schema] of Object.entries(COMPONENTS)) plain[name] = toJsonSchema(schema);
  const schemas: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(plain)) schemas[name] = referenceComponents(schema, plain, name);

  const paths: Record<string, Record<string, object>> = {};
  for (const op of [...OPERATIONS, ...SESSION_OPERATIONS, ...ADMIN_OPERATIONS]) {
    const item = (paths[op.path] ??= {});
    if (item[op.method]) throw new Error(`openapi: ${op.method} ${op.path} is declared twice`);
    item[op.method] = operationObject(op);
  }

  return {
    openapi: '3.1.0',
    info: { title: 'Algorithm Service', version: SERVICE_VERSION, description: DESCRIPTION },
    servers: [{ url: '/', description: 'the reachable {base_url}; HTTPS in production' }],
    tags: TAGS,
    paths: referenceComponents(paths, plain),
    components: {
      schemas,
      headers: { 'X-Request-ID': { description: 'id of this request, in every answer and in the logs', schema: { type: 'string' } } },
      securitySchemes: {
        businessToken: { type: 'http', scheme: 'bearer', description: 'business token (lvk_...), /v1 only' },
        sessionToken: { type: 'http', scheme: 'bearer', description: 'device session token (lvs_...) from POST /v1/sessions: verify of its own module and GET /v1/me only' },
        adminSession: { type: 'apiKey', in: 'cookie', name: 'lv_session', description: 'administrator session cookie (<COOKIE_PREFIX>_session)' },
      },
    },
  };
}
