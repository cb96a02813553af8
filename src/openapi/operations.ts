// The public, business and session operations. Administration API: admin-operations.ts.

import { Type } from '@sinclair/typebox';
import * as ex from './examples.ts';
import { moduleIdParam, retryAfter, type Operation } from './operation.ts';
import { MeAnswer } from './session-operations.ts';

const VERIFY_422 = 'Validation error (invalid_input): metadata, ordering, geometry, parts, image bytes or hashes, '
  + 'or a body that is not valid multipart framing (loc ["body"], type multipart_invalid)';

const verdictSignatureExceptCap = { 'X-Verdict-Signature': { schema: { type: 'string' }, description: 'detached JWS (EdDSA) over the exact body bytes; absent on the 503 server_busy of the connection cap (CONNECTIONS_PER_ADDRESS), which is answered before any route is chosen' } };
const verdictSignature = { 'X-Verdict-Signature': { schema: { type: 'string' }, description: 'detached JWS (EdDSA) over the exact body bytes; keys at /.well-known/jwks.json' } };

export const OPERATIONS: Operation[] = [
  {
    method: 'get', path: '/health/live', operationId: 'getHealthLive', tag: 'health', auth: 'none',
    summary: 'Process liveness',
    success: { status: '200', description: 'The process answers', schema: 'HealthLive', example: { status: 'live' } },
    errors: [],
  },
  {
    method: 'get', path: '/health/ready', operationId: 'getHealthReady', tag: 'health', auth: 'none',
    summary: 'Model readiness: the store answers and every enabled module is loaded and warmed',
    success: { status: '200', description: 'Ready', schema: 'HealthReady', example: ex.healthReady },
    errors: [],
    extraResponses: {
      '503': {
        description: 'Not ready (the same shape, status not_ready)',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/HealthReady' }, example: { ...ex.healthReady, status: 'not_ready', modules: { rgb_liveness: { ...ex.healthReady.modules.rgb_liveness, ready: false } } } } },
      },
    },
  },
  {
    method: 'get', path: '/v1/me', operationId: 'getMe', tag: 'business', auth: 'bearerOrDevice',
    summary: 'Current token and its usage (a session token: the session); not metered',
    success: { status: '200', description: 'The token and a usage snapshot per granted module; with a session token, the session (module, captures left, expiry)', schema: MeAnswer, example: ex.me },
    errors: ['invalid_token', 'invalid_session_token'],
  },
  {
    method: 'get', path: '/v1/modules', operationId: 'listModules', tag: 'business', auth: 'bearer',
    summary: 'Modules granted to the token and their status; not metered',
    success: { status: '200', description: 'Granted modules', schema: 'ModulesResponse', example: ex.modules },
    errors: ['invalid_token', 'invalid_session_token', 'session_not_allowed'],
  },
  {
    method: 'post', path: '/v1/modules/{module_id}/verify', operationId: 'verify', tag: 'business', auth: 'bearerOrDevice',
    summary: 'Verify one capture or a batch',
    description: 'One unit is charged per capture. HTTP 200 alone is not a liveness verdict: read `status` and `alive` of each result. '
      + 'Retry server_busy, module_unavailable, store_unavailable, request_in_progress, request_timeout and inference_failed with the same Idempotency-Key and the same bytes. '
      + 'store_unavailable (503): the store cannot write (a full disk); the message says what was recorded, and nothing is charged. '
      + 'An upload below UPLOAD_MIN_BYTES_PER_SECOND over UPLOAD_RATE_WINDOW_SECONDS, or still running after UPLOAD_DEADLINE_SECONDS, is answered 408 request_timeout '
      + '(nothing charged, the key not bound). Capacity is 2 x WORKERS slots (VERIFY_SLOTS when an operator sets it) shared by the whole host, with caps per client address and per token (503 server_busy). '
      + 'With a session token: only the session\'s module (else 403 session_not_allowed); the business token\'s quota is charged, and a call that would pass the '
      + 'session\'s max_captures is refused whole (429 session_captures_exceeded, nothing charged). '
      + 'The Content-Type must be multipart/form-data with one valid boundary (RFC 2046: 1 to 70 characters); the HTTP library generates it, boundary included, from the form data, so never set it by hand. '
      + 'Anything else is 415 unsupported_media_type, whose message names the fault: not multipart/form-data, no boundary parameter, a repeated boundary parameter, an invalid boundary, or parameters that cannot be read.',
    parameters: [
      moduleIdParam,
      {
        name: 'Idempotency-Key', in: 'header', required: false, example: 'b7e3c1a0-2f4d-4e5a-9b8c-7d6e5f4a3b2c',
        description: 'makes a retry safe: the same key with the same request replays the saved answer without a new charge',
        schema: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[!-~]+$' },
      },
    ],
    rawBody: {
      required: true,
      content: {
        'multipart/form-data': {
          schema: {
            type: 'object',
            required: ['metadata'],
            properties: {
              metadata: {
                type: 'string', contentMediaType: 'application/json', contentSchema: { $ref: '#/components/schemas/Metadata' },
                description: 'JSON text: one capture or {captures:[...]} of the path module\'s modes (schema Metadata: RgbLivenessMetadata for rgb_liveness, '
                  + 'ColorLivenessMetadata for color_liveness); a field without filename, sent first. The part\'s own Content-Type header, if it has one, is not read: '
                  + 'the text is parsed as UTF-8 JSON whatever it says (a text field normally has none; libraries that label it application/json or text/plain are both served)',
              },
            },
            additionalProperties: { type: 'string', contentMediaType: 'application/octet-stream', description: 'one file part per image.part (png or rgb8), at most 1 MiB each' },
          },
          // any: the part's Content-Type is not read (the description above says so)
          encoding: { metadata: { contentType: '*/*' } },
          example: ex.verifyRequest,
        },
      },
    },
    success: {
      status: '200', description: 'Verification results (HTTP 200 alone is not a liveness verdict: read status and alive)', schema: 'VerifyResponse', example: ex.verifyResponse,
      headers: {
        'Idempotency-Replayed': { schema: { type: 'string', enum: ['true'] }, description: 'the saved answer of an earlier call with this key' },
        ...verdictSignature,
        traceparent: {
          schema: { type: 'string', pattern: '^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$' },
          description: 'only when the service traces verify calls (OTEL_* variables): the W3C trace context of the call\'s server span, which continues a traceparent sent with the request (every verify answer carries it, errors included)',
        },
      },
    },
    errors: [
      'invalid_idempotency_key', 'invalid_content_length', 'invalid_token', 'module_forbidden', 'module_disabled', 'module_not_found',
      'request_in_progress', 'idempotency_conflict', 'payload_too_large', 'unsupported_media_type', 'quota_exceeded',
      'inference_failed', 'settlement_failed', 'server_busy', 'module_unavailable', 'store_unavailable', 'request_timeout',
      'invalid_session_token', 'session_not_allowed', 'session_captures_exceeded',
    ],
    validation: { description: VERIFY_422, example: ex.verifyValidation },
    // every verify answer is signed, errors included (docs/administration.md), but for the
    // connection cap's 503, answered before any route is chosen
    errorHeaders: Object.fromEntries(['400', '401', '403', '404', '408', '409', '413', '415', '422', '429', '500', '503'].map((status) => [status, {
      ...(status === '503' ? verdictSignatureExceptCap : verdictSignature),
      ...(['409', '429', '503'].includes(status) ? retryAfter : {}),
    }])),
  },
  {
    method: 'post', path: '/auth/login', operationId: 'login', tag: 'auth', auth: 'none',
    summary: 'Administrator login: sets the session cookie and returns the CSRF token',
    body: { schema: 'Login', example: { username: 'root', password: 'correct horse battery' } },
    success: {
      status: '200', description: 'Logged in', schema: 'Session', example: ex.session,
      headers: { 'Set-Cookie': { schema: { type: 'string' }, description: 'the session cookie (lv_session by default, COOKIE_PREFIX): HttpOnly, SameSite=Strict, Path=/, Secure when COOKIE_SECURE or TLS' } },
    },
    errors: ['invalid_credentials', 'login_disabled', 'too_many_attempts', 'server_busy'],
    validation: { example: { detail: [{ loc: ['body', 'password'], msg: 'Field required', type: 'missing' }] } },
    errorHeaders: { '429': retryAfter, '503': retryAfter },
  },
  {
    method: 'get', path: '/auth/session', operationId: 'getSession', tag: 'auth', auth: 'session',
    summary: 'Current session',
    success: { status: '200', description: 'The session', schema: 'Session', example: ex.session },
    errors: ['invalid_session'],
  },
  {
    method: 'post', path: '/auth/logout', operationId: 'logout', tag: 'auth', auth: 'session', csrf: true,
    summary: 'End the session',
    success: { status: '204', description: 'Logged out', headers: { 'Set-Cookie': { schema: { type: 'string' }, description: 'the session cookie cleared (Max-Age=0)' } } },
    errors: ['invalid_session'],
  },
  {
    method: 'get', path: '/.well-known/jwks.json', operationId: 'getJwks', tag: 'meta', auth: 'none',
    summary: 'Public keys of the verdict signatures',
    success: { status: '200', description: 'JSON Web Key Set: the current key and keys retired in the last 7 days. Nodes on one database serve the same set; a rotation appears on every node within 10 s', schema: 'Jwks', example: ex.jwks },
    errors: [],
  },
  {
    method: 'get', path: '/', operationId: 'getRoot', tag: 'meta', auth: 'none',
    summary: 'Where things are: the console, this document, readiness and the docs (the URL the start line prints)',
    success: {
      status: '200', description: 'Pointers, the same for every caller',
      schema: Type.Object({ service: Type.String(), version: Type.String(), console: Type.String(), openapi: Type.String(), health: Type.String(), docs: Type.String() }),
      example: {
        service: 'liveness verification service', version: '0.5.1', console: '/admin', openapi: '/openapi.json', health: '/health/ready',
        docs: 'README.md and docs/ in the service\'s source; docs/endpoints.md lists every endpoint',
      },
    },
    errors: [],
  },
  {
    method: 'get', path: '/openapi.json', operationId: 'getOpenApi', tag: 'meta', auth: 'none',
    summary: 'This document',
    success: { status: '200', description: 'OpenAPI 3.1.0', schema: Type.Object({ openapi: Type.String() }, { additionalProperties: true }), example: { openapi: '3.1.0' } },
    errors: [],
  },
  {
    method: 'get', path: '/metrics', operationId: 'getMetrics', tag: 'meta', auth: 'none',
    summary: 'Prometheus metrics (loopback, or Authorization: Bearer METRICS_TOKEN)',
    description: 'Other clients get a 404 not_found, as for a path that does not exist (the endpoint is no secret: keep it on loopback or behind METRICS_TOKEN).',
    success: { status: '200', description: 'Text exposition format', contentType: 'text/plain', schema: Type.String(), example: '# HELP http_requests_total Requests\n' },
    errors: ['not_found'],
  },
];
