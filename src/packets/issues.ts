// FastAPI-style 422 items: how a TypeBox error or a rule violation becomes {loc, msg, type,
// input?, ctx?}. Type names follow pydantic v2 where one exists (missing, extra_forbidden,
// int_type, literal_error, ...) so clients written against FastAPI services read them as usual.

import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { type ValidationIssue, MAX_ISSUES } from '../contract/index.ts';
import { codePointLength, lengthBounds } from './lengths.ts';

export { codePointLength };

export type Loc = (string | number)[];

export const METADATA_LOC: readonly ['body', 'metadata'] = ['body', 'metadata'];

/** Collects issues up to MAX_ISSUES: a 1 MiB metadata field full of unknown keys must not
 * produce a response many times its own size. */
export class IssueList {
  readonly items: ValidationIssue[] = [];
  private truncated = false;

  add(issue: ValidationIssue): void {
    if (this.items.length < MAX_ISSUES) {
      this.items.push(issue);
      return;
    }
    if (!this.truncated) {
      this.truncated = true;
      this.items.push({
        loc: [...METADATA_LOC],
        msg: `More than ${MAX_ISSUES} errors; only the first ${MAX_ISSUES} are listed`,
        type: 'too_many_errors',
        ctx: { limit: MAX_ISSUES },
      });
    }
  }

  issue(loc: Loc, type: string, msg: string, ctx?: Record<string, unknown>, input?: unknown): void {
    const item: ValidationIssue = { loc, msg, type };
    if (input !== undefined) item.input = input;
    if (ctx !== undefined) item.ctx = ctx;
    this.add(item);
  }

  get full(): boolean {
    return this.truncated;
  }

  get length(): number {
    return this.items.length;
  }
}

/** Echo small inputs only: echoing a rejected 100 kB string or a whole frames array back in
 * every item would make the error larger than the request. */
export function echoInput(value: unknown): unknown {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string') return value.length <= 256 ? value : undefined;
  if (Array.isArray(value) || (typeof value === 'object' && value !== null)) {
    const size = Array.isArray(value) ? value.length : Object.keys(value).length;
    if (size > 16) return undefined;
    try {
      return JSON.stringify(value).length <= 256 ? value : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** JSON-pointer path of a TypeBox error -> loc segments, array indices as numbers. The root
 * value is walked so that an object key that happens to be "0" stays a string. */
export function pathToLoc(base: Loc, path: string, root: unknown): Loc {
  const loc: Loc = [...base];
  if (path === '') return loc;
  let node: unknown = root;
  for (const raw of path.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node) && /^\d+$/.test(key)) {
      const index = Number(key);
      loc.push(index);
      node = node[index];
    } else {
      loc.push(key);
      node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
    }
  }
  return loc;
}

function describeLiterals(schema: { anyOf?: { const?: unknown }[]; const?: unknown }): string | null {
  const consts = schema.anyOf ? schema.anyOf.map((s) => s.const) : [schema.const];
  if (consts.some((c) => c === undefined)) return null;
  const shown = consts.map((c) => (typeof c === 'string' ? `'${c}'` : String(c)));
  return shown.length === 1 ? shown[0] : `${shown.slice(0, -1).join(', ')} or ${shown[shown.length - 1]}`;
}

/** Adds the issues of one failed schema check. Returns nothing: several TypeBox errors can
 * collapse into one item (a missing field is also reported as "expected integer"). */
export function addSchemaErrors(errors: Iterable<ValueError>, base: Loc, root: unknown, out: IssueList): void {
  const missing = new Set<string>();
  for (const e of errors) {
    if (out.full) return;
    if (missing.has(e.path)) continue;
    const loc = pathToLoc(base, e.path, root);
    const value = e.value;
    const schema = e.schema as Record<string, unknown> & { anyOf?: { const?: unknown }[]; const?: unknown };
    switch (e.type) {
      case ValueErrorType.ObjectRequiredProperty:
        missing.add(e.path);
        out.issue(loc, 'missing', 'Field required');
        break;
      case ValueErrorType.ObjectAdditionalProperties:
        out.issue(loc, 'extra_forbidden', 'Extra inputs are not permitted', undefined, echoInput(value));
        break;
      case ValueErrorType.Object:
        out.issue(loc, 'dict_type', 'Input should be a JSON object', undefined, echoInput(value));
        break;
      case ValueErrorType.Array:
      case ValueErrorType.Tuple:
        out.issue(loc, 'list_type', 'Input should be a JSON array', undefined, echoInput(value));
        break;
      case ValueErrorType.TupleLength: {
        const want = schema.maxItems as number;
        const got = Array.isArray(value) ? value.length : 0;
        if (got < want) {
          out.issue(loc, 'too_short', `Array should have exactly ${want} items, not ${got}`, { min_length: want, actual_length: got }, echoInput(value));
        } else {
          out.issue(loc, 'too_long', `Array should have exactly ${want} items, not ${got}`, { max_length: want, actual_length: got }, echoInput(value));
        }
        break;
      }
      case ValueErrorType.Integer:
        if (typeof value === 'number' && !Number.isFinite(value)) {
          out.issue(loc, 'finite_number', 'Input should be a finite number');
        } else if (typeof value === 'number') {
          out.issue(loc, 'int_from_float', 'Input should be a valid integer, got a number with a fractional part', undefined, value);
        } else {
          out.issue(loc, 'int_type', 'Input should be a valid integer', undefined, echoInput(value));
        }
        break;
      case ValueErrorType.Number:
        if (typeof value === 'number') {
          out.issue(loc, 'finite_number', 'Input should be a finite number');
        } else {
          out.issue(loc, 'float_type', 'Input should be a valid number', undefined, echoInput(value));
        }
        break;
      case ValueErrorType.IntegerMinimum:
      case ValueErrorType.NumberMinimum:
        out.issue(loc, 'greater_than_equal', `Input should be greater than or equal to ${schema.minimum}`, { ge: schema.minimum }, echoInput(value));
        break;
      case ValueErrorType.IntegerMaximum:
      case ValueErrorType.NumberMaximum:
        out.issue(loc, 'less_than_equal', `Input should be less than or equal to ${schema.maximum}`, { le: schema.maximum }, echoInput(value));
        break;
      case ValueErrorType.String:
        out.issue(loc, 'string_type', 'Input should be a valid string', undefined, echoInput(value));
        break;
      case ValueErrorType.StringMinLength: {
        // lengths in code points, as the spec and JSON Schema count them (lengths.ts: the
        // bounds as written, where the schema is a compileCodePoints copy)
        const min = lengthBounds(schema).minLength as number;
        const n = codePointLength(value as string);
        if (n < min) {
          out.issue(loc, 'string_too_short', `String should have at least ${min} character${min === 1 ? '' : 's'}`, { min_length: min }, echoInput(value));
        }
        break;
      }
      case ValueErrorType.StringMaxLength: {
        // TypeBox counts UTF-16 code units: a string of astral characters can trip TypeBox
        // while being within the limit (compileCodePoints drops those errors already)
        const max = lengthBounds(schema).maxLength as number;
        const n = codePointLength(value as string);
        if (n > max) {
          out.issue(loc, 'string_too_long', `String should have at most ${max} characters, not ${n}`, { max_length: max, actual_length: n }, echoInput(value));
        }
        break;
      }
      case ValueErrorType.StringPattern:
        out.issue(loc, 'string_pattern_mismatch', `String should match pattern '${schema.pattern}'`, { pattern: schema.pattern }, echoInput(value));
        break;
      case ValueErrorType.Boolean:
        out.issue(loc, 'bool_type', 'Input should be a valid boolean', undefined, echoInput(value));
        break;
      case ValueErrorType.Literal:
      case ValueErrorType.Union: {
        const expected = describeLiterals(schema);
        if (expected !== null) {
          out.issue(loc, 'literal_error', `Input should be ${expected}`, { expected }, echoInput(value));
        } else {
          out.issue(loc, 'union_error', e.message, undefined, echoInput(value));
        }
        break;
      }
      default:
        out.issue(loc, 'value_error', e.message, undefined, echoInput(value));
    }
  }
}
