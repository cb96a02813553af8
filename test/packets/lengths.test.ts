import t from 'tap';
import { Type, Kind, type TSchema } from '@sinclair/typebox';
import { compileCodePoints } from '../../src/packets/lengths.ts';
import { bodyParser } from '../../src/packets/index.ts';
import type { ValidationFailure } from '../../src/errors/index.ts';
import { LoginSchema } from '../../src/auth/schemas.ts';
import { TokenCreateSchema, TokenPatchSchema, UserCreateSchema, UserPatchSchema, GrantBodySchema, ModulePatchSchema, SettlementResolveSchema } from '../../src/admin/schemas.ts';
import { SessionCreateSchema } from '../../src/sessions/index.ts';
import { ModelSetActivateSchema } from '../../src/http/routes/model-sets.ts';
import { BatchEnvelopeSchema, CapturePacketSchema } from '../../src/packets/schemas.ts';

// lengths.ts: minLength/maxLength in code points (review 3, F2)
const EMOJI = '\u{1F600}';

t.test('compileCodePoints counts code points both ways', async (t) => {
  const check = compileCodePoints(Type.Object({ s: Type.String({ minLength: 3, maxLength: 4 }) }));
  t.ok(check.Check({ s: EMOJI.repeat(4) }), '4 characters, 8 units: within the maximum');
  t.ok(check.Check({ s: EMOJI.repeat(3) }), '3 characters, 6 units');
  t.notOk(check.Check({ s: EMOJI.repeat(2) }), '2 characters, 4 units: under the minimum');
  t.notOk(check.Check({ s: EMOJI.repeat(5) }), '5 characters: over the maximum');
  t.notOk(check.Check({ s: 'ab' }));
  t.ok(check.Check({ s: 'abcd' }));
  t.same([...check.Errors({ s: EMOJI.repeat(4) })], [], 'no error left for a string within the bounds');
  t.equal([...check.Errors({ s: EMOJI.repeat(2) })].length, 1);
});

t.test('bodyParser names the field with string_too_short / string_too_long, never model_type', async (t) => {
  const parse = bodyParser(Type.Object({ s: Type.String({ minLength: 3, maxLength: 4 }) }));
  t.same(parse({ s: EMOJI.repeat(4) }), { s: EMOJI.repeat(4) });
  const detail = (body: unknown) => {
    try {
      parse(body);
    } catch (e) {
      return (e as ValidationFailure).detail;
    }
    return null;
  };
  t.same(detail({ s: EMOJI.repeat(2) }), [{ loc: ['body', 's'], msg: 'String should have at least 3 characters', type: 'string_too_short', ctx: { min_length: 3 }, input: EMOJI.repeat(2) }]);
  t.same(detail({ s: EMOJI.repeat(5) }), [{ loc: ['body', 's'], msg: 'String should have at most 4 characters, not 5', type: 'string_too_long', ctx: { max_length: 4, actual_length: 5 }, input: EMOJI.repeat(5) }]);
});

// the limit lengths.ts states: a length inside a union branch is not re-counted
function lengthsInUnions(schema: unknown, inUnion = false, found: string[] = [], at = ''): string[] {
  if (Array.isArray(schema)) {
    schema.forEach((s, i) => lengthsInUnions(s, inUnion, found, `${at}/${i}`));
    return found;
  }
  if (schema === null || typeof schema !== 'object') return found;
  const s = schema as TSchema & Record<string, unknown>;
  if (inUnion && s.type === 'string' && (s.minLength !== undefined || s.maxLength !== undefined)) found.push(at);
  const union = s[Kind] === 'Union' && (s.anyOf as unknown[]).some((b) => (b as TSchema)[Kind] !== 'Literal');
  for (const [k, v] of Object.entries(s)) lengthsInUnions(v, inUnion || union, found, `${at}/${k}`);
  return found;
}

t.test('no body schema holds a length-bounded string inside a union', async (t) => {
  const bodies = { LoginSchema, TokenCreateSchema, TokenPatchSchema, UserCreateSchema, UserPatchSchema, GrantBodySchema, ModulePatchSchema, SettlementResolveSchema, SessionCreateSchema, ModelSetActivateSchema, CapturePacketSchema, BatchEnvelopeSchema };
  for (const [name, schema] of Object.entries(bodies)) t.same(lengthsInUnions(schema), [], name);
  t.same(lengthsInUnions(Type.Union([Type.String({ maxLength: 2 }), Type.Null()])), ['/anyOf/0'], 'the walk finds one');
});
