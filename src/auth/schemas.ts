import { Type } from '@sinclair/typebox';

export const LoginSchema = Type.Object(
  {
    // no name holds U+0000 (names are A-Z a-z 0-9 _ . @ -), and PostgreSQL text cannot: such a
    // login is refused as malformed before the throttle's store lookup (it was a 500 there)
    username: Type.String({ minLength: 1, maxLength: 64, pattern: '^[^\\u0000]*$', description: 'no U+0000' }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
  },
  { additionalProperties: false },
);

export const SessionSchema = Type.Object({
  username: Type.String(),
  role: Type.Union([Type.Literal('admin'), Type.Literal('user')]),
  csrf_token: Type.String({ description: 'send as X-CSRF-Token on every state-changing administration call' }),
  expires_at: Type.String({ format: 'date-time', description: 'absolute end of the session' }),
});
