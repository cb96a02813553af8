// String lengths in Unicode code points, as the spec, JSON Schema (minLength/maxLength) and
// pydantic count them. TypeBox counts UTF-16 code units (`.length`): a character outside the
// BMP (an emoji) is two units, so a name of 101 emoji failed maxLength 200, and a password of
// 4 emoji passed minLength 8 (review 3, F2). The schemas keep minLength/maxLength as they are
// (the OpenAPI document is generated from them); checks compile a copy instead:
//
// - maxLength: UTF-16 length >= code points, so TypeBox reports every string over the limit
//   in code points, and some that are not; those are dropped here.
// - minLength m > 1: a string of fewer than m code points is at most 2(m - 1) UTF-16 units, so
//   the copy asks for 2m - 1 units. TypeBox then reports every string short in code points,
//   and some that are not; those are dropped here. (m <= 1 means the same in both counts.)
//
// Limit: a length fault inside a union branch surfaces as the union's own error, which is not
// re-counted. No body schema has a length-bounded string inside a union (admin, auth, sessions,
// model sets, verify metadata); a test keeps it so (test/packets/lengths.test.ts).

import type { Static, TSchema } from '@sinclair/typebox';
import { TypeCompiler, ValueErrorType, type ValueError } from '@sinclair/typebox/compiler';

/** Characters as the spec counts them: Unicode code points (a lone surrogate counts as one),
 * which is also how JSON Schema defines minLength/maxLength. */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** The bounds a string schema of the copy had in the original. */
const BOUNDS = Symbol('code-point bounds');

interface Bounds {
  minLength?: number;
  maxLength?: number;
}

type Node = Record<string | symbol, unknown>;

/** The limits of a string schema as written (in code points): those of the original where
 * `schema` is the compiled copy's. */
export function lengthBounds(schema: unknown): Bounds {
  const s = schema as Node & Bounds;
  return (s[BOUNDS] as Bounds | undefined) ?? { minLength: s.minLength, maxLength: s.maxLength };
}

function copy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(copy);
  if (node === null || typeof node !== 'object' || Object.getPrototypeOf(node) !== Object.prototype) return node;
  // the spread keeps TypeBox's symbol keys (Kind, OptionalKind), which the compiler reads
  const out: Node = { ...(node as Node) };
  for (const key of Object.keys(out)) out[key] = copy(out[key]);
  if (out.type === 'string' && typeof out.minLength === 'number' && out.minLength > 1) {
    out[BOUNDS] = { minLength: out.minLength, maxLength: out.maxLength as number | undefined } satisfies Bounds;
    out.minLength = 2 * out.minLength - 1;
  }
  return out;
}

/** A length error TypeBox reports that does not hold in code points. */
function countsWrongly(e: ValueError): boolean {
  if (typeof e.value !== 'string') return false;
  const { minLength, maxLength } = lengthBounds(e.schema);
  if (e.type === ValueErrorType.StringMinLength) return minLength === undefined || codePointLength(e.value) >= minLength;
  if (e.type === ValueErrorType.StringMaxLength) return maxLength === undefined || codePointLength(e.value) <= maxLength;
  return false;
}

export interface CodePointCheck<T extends TSchema> {
  Check(value: unknown): value is Static<T>;
  /** TypeBox's errors, less the length errors that do not hold in code points */
  Errors(value: unknown): IterableIterator<ValueError>;
}

/** TypeCompiler.Compile(schema), with string lengths counted in code points. */
export function compileCodePoints<T extends TSchema>(schema: T): CodePointCheck<T> {
  const check = TypeCompiler.Compile(copy(schema) as T);
  function* errors(value: unknown): IterableIterator<ValueError> {
    for (const e of check.Errors(value)) if (!countsWrongly(e)) yield e;
  }
  return {
    Check: (value): value is Static<T> => check.Check(value) || errors(value).next().done === true,
    Errors: errors,
  };
}
