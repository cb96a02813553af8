import { FormatRegistry, Type, type Static } from '@sinclair/typebox';
import { NAME_TEXT } from '../packets/index.ts';
import { isCalendarText } from './calendar.ts';

// Bodies of the administration API (contract.md "Administration API"). Unknown fields are
// rejected everywhere (additionalProperties: false), as the contract requires.
// A four-digit year is not enough: an offset moves the instant, and
// `9999-12-31T23:59:59-23:59` was stored and answered as `+010000-01-01T23:58:59.000Z`, which
// is not a date-time (issue 29). The instant must itself have a four-digit UTC year.
const FIRST_INSTANT = Date.parse('0000-01-01T00:00:00Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set('date-time', (v) => {
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.test(v) || !isCalendarText(v)) return false;
    const ms = Date.parse(v);
    return ms >= FIRST_INSTANT && ms <= LAST_INSTANT;
  });
}

const strict = { additionalProperties: false } as const;

export const ModuleIdSchema = Type.Union([Type.Literal('rgb_liveness'), Type.Literal('color_liveness')]);
export const RoleSchema = Type.Union([Type.Literal('admin'), Type.Literal('user')]);
export const PeriodSchema = Type.Union([Type.Literal('day'), Type.Literal('month'), Type.Literal('never')]);
export const LimitSchema = Type.Union([Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1 }), Type.Null()], {
  description: 'units per period; null is unlimited (usage still recorded); 0 authorises the module with nothing available',
});
export const ExpiresAtSchema = Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'ISO 8601 time whose UTC year has four digits (0000 to 9999); null never expires' });
export const UsernameSchema = Type.String({ pattern: '^[A-Za-z0-9_.@-]{1,64}$' });
export const PasswordSchema = Type.String({ minLength: 8, maxLength: 1024 });
// the BMP's control, format (Cf), default-ignorable and line/paragraph separator characters, as
// a regex class body (test/packets/name-text.test.ts holds it equal to the format)
const BMP_FORMAT_AND_CONTROL = '\\u0000-\\u001F\\u007F-\\u009F\\u00AD\\u034F\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u0890\\u0891\\u08E2\\u115F\\u1160\\u17B4\\u17B5\\u180B-\\u180F\\u200B-\\u200F\\u2028-\\u202E\\u2060-\\u206F\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0\\uFFF0-\\uFFFB';
export const TokenNameSchema = Type.String({
  minLength: 1,
  maxLength: 200,
  format: NAME_TEXT,
  // what NAME_TEXT refuses, said as a pattern that any JSON Schema tool applies (issue 29: the
  // format alone is opaque to a client): white space at either end, the control characters
  // (C0, DEL, C1), the format characters of the Basic Multilingual Plane and the line and
  // paragraph separators; it means the same with and without the regex u flag. Lone
  // surrogates and the few format characters beyond U+FFFF are refused by the format only.
  // (without lookaheads, which generators of examples from a pattern do not all read)
  pattern: `^[^\\s${BMP_FORMAT_AND_CONTROL}](?:[^${BMP_FORMAT_AND_CONTROL}]*[^\\s${BMP_FORMAT_AND_CONTROL}])?$`,
  description: 'well-formed Unicode (no lone surrogates) without control characters (U+0000-U+001F, U+007F-U+009F), format and other invisible characters (Unicode category Cf and Default_Ignorable_Code_Point: zero-width characters, U+FEFF, the soft hyphen, bidirectional marks and overrides, the combining grapheme joiner, Hangul fillers, variation selectors), line or paragraph separators (U+2028, U+2029), and without white space at either end (422 string_unicode); unique among tokens, ignoring case (409 conflict)',
});

export const GrantBodySchema = Type.Object({ limit: LimitSchema, period: PeriodSchema }, strict);
export const GrantSchema = Type.Object({ module_id: ModuleIdSchema, limit: LimitSchema, period: PeriodSchema }, strict);

export const ModulePatchSchema = Type.Object({ enabled: Type.Boolean() }, strict);
// The acting operator's own password: a console session alone (a stolen cookie and its
// CSRF token) must not be enough to give or take admin access or to set a password (issue 40).
const CurrentPasswordSchema = (required: string) => Type.Optional(Type.String({
  minLength: 1,
  maxLength: 1024,
  description: `the acting operator's own password, required ${required}; checked under the login throttle (missing 422, wrong 403 invalid_current_password, too many wrong 429)`,
}));
export const UserCreateSchema = Type.Object(
  { username: UsernameSchema, password: PasswordSchema, role: RoleSchema, current_password: CurrentPasswordSchema('when `role` is `admin`') },
  strict,
);
export const UserPatchSchema = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean()),
    password: Type.Optional(PasswordSchema),
    role: Type.Optional(RoleSchema),
    current_password: CurrentPasswordSchema('with `password` (any user\'s), and with a change of `role` or `enabled` that gives or takes admin access (promoting, demoting, disabling or enabling an admin)'),
  },
  strict,
);
export const TokenCreateSchema = Type.Object(
  {
    name: TokenNameSchema,
    expires_at: Type.Optional(ExpiresAtSchema),
    demo: Type.Optional(Type.Boolean({ description: 'archive this token\'s images per UTC day' })),
    grants: Type.Array(GrantSchema, { maxItems: 2 }),
  },
  strict,
);
export const TokenPatchSchema = Type.Object(
  {
    name: Type.Optional(TokenNameSchema),
    enabled: Type.Optional(Type.Boolean()),
    expires_at: Type.Optional(ExpiresAtSchema),
    demo: Type.Optional(Type.Boolean()),
  },
  strict,
);
export const SettlementResolveSchema = Type.Object({ action: Type.Union([Type.Literal('charge'), Type.Literal('refund')]) }, strict);

export type GrantBody = Static<typeof GrantBodySchema>;
export type TokenCreate = Static<typeof TokenCreateSchema>;
export type TokenPatch = Static<typeof TokenPatchSchema>;
export type UserCreate = Static<typeof UserCreateSchema>;
export type UserPatch = Static<typeof UserPatchSchema>;
