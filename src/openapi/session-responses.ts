import { Type } from '@sinclair/typebox';
import { ModuleIdSchema } from '../admin/index.ts';
import { ResultRecord } from './responses.ts';

// Answers of /v1/sessions and of GET /v1/me with a session token (issue 26), described for
// clients; src/sessions/index.ts builds them.

const DateTime = Type.String({ format: 'date-time' });

export const SessionCreated = Type.Object({
  session_id: Type.String({ pattern: '^ses_' }),
  session_token: Type.String({ pattern: '^lvs_', description: 'shown once: only its hash is stored. Hand it to the device' }),
  module_id: ModuleIdSchema,
  expires_at: DateTime,
  max_captures: Type.Integer({ minimum: 1 }),
});

export const SessionStateSchema = Type.Union(['active', 'expired', 'exhausted', 'revoked'].map((s) => Type.Literal(s)), {
  description: 'revoked (DELETE), else expired (past expires_at), else exhausted (captures_used = max_captures), else active',
});

export const SessionVerification = Type.Object({
  request_id: Type.String(),
  status: Type.Union(['completed', 'pending', 'refunded', 'settlement_failed'].map((s) => Type.Literal(s)), {
    description: 'completed: answered 200 and charged; pending: still running; refunded: failed and given back (nothing charged); settlement_failed: held for the operator',
  }),
  charged_units: Type.Integer({ minimum: 0 }),
  results: Type.Union([Type.Array(ResultRecord), Type.Null()], { description: 'the result records with the keys and values the verify answer had (on PostgreSQL a record\'s keys may come in another order); null unless completed (or once RETENTION_RESULTS_DAYS pruned them)' }),
});

export const SessionStatus = Type.Object({
  session_id: Type.String(),
  module_id: ModuleIdSchema,
  state: SessionStateSchema,
  created_at: DateTime,
  expires_at: DateTime,
  revoked_at: Type.Union([DateTime, Type.Null()]),
  max_captures: Type.Integer(),
  captures_used: Type.Integer(),
  results: Type.Array(SessionVerification, { description: 'each verify call made with the session, oldest first' }),
});

export const ActiveSession = Type.Object({
  session_id: Type.String(),
  module_id: ModuleIdSchema,
  state: SessionStateSchema,
  created_at: DateTime,
  expires_at: DateTime,
  max_captures: Type.Integer(),
  captures_used: Type.Integer(),
});

export const SessionMe = Type.Object({
  session: Type.Object({
    session_id: Type.String(),
    module_id: ModuleIdSchema,
    state: SessionStateSchema,
    expires_at: DateTime,
    max_captures: Type.Integer(),
    captures_used: Type.Integer(),
    captures_left: Type.Integer({ minimum: 0 }),
  }),
});
