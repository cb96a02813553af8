import { Type } from '@sinclair/typebox';

export const LoginSchema = Type.Object(
  { username: Type.String({ minLength: 1, maxLength: 64 }), password: Type.String({ minLength: 1, maxLength: 1024 }) },
  { additionalProperties: false },
);

export const SessionSchema = Type.Object({
  username: Type.String(),
  role: Type.Union([Type.Literal('admin'), Type.Literal('user')]),
  csrf_token: Type.String({ description: 'send as X-CSRF-Token on every state-changing administration call' }),
  expires_at: Type.String({ format: 'date-time', description: 'absolute end of the session' }),
});
