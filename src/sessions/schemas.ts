import { Type } from '@sinclair/typebox';
import { ModuleIdSchema } from '../admin/index.ts';
import { MAX_SESSION_CAPTURES, MAX_SESSION_TTL_SECONDS } from '../store/index.ts';

// The body of POST /v1/sessions (issue 26; the answers' shapes are in
// src/openapi/session-responses.ts). The bounds here are hard ones; the configured
// limits (SESSION_MAX_TTL_SECONDS, SESSION_MAX_CAPTURES) shorten an ask within them instead of
// refusing it, so what this schema allows, the service accepts.

export const DEFAULT_TTL_SECONDS = 300;
export const DEFAULT_MAX_CAPTURES = 3;

export const SessionCreateSchema = Type.Object(
  {
    module_id: ModuleIdSchema,
    ttl_seconds: Type.Optional(Type.Integer({
      minimum: 1, maximum: MAX_SESSION_TTL_SECONDS,
      description: `lifetime in seconds, default ${DEFAULT_TTL_SECONDS}; shortened to SESSION_MAX_TTL_SECONDS (default 3600) and to the business token's expiry`,
    })),
    max_captures: Type.Optional(Type.Integer({
      minimum: 1, maximum: MAX_SESSION_CAPTURES,
      description: `captures the session may verify in all, default ${DEFAULT_MAX_CAPTURES}; lowered to SESSION_MAX_CAPTURES (default 100)`,
    })),
  },
  { additionalProperties: false },
);
