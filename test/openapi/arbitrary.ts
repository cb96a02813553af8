import fc from 'fast-check';

// fast-check arbitraries drawn from the OpenAPI document's own JSON Schemas, in the spirit of
// Schemathesis: values that fit the schema (with its boundaries: shortest and longest
// strings, smallest and largest numbers, documented examples), and values that break it in
// one place (wrong type, out of range, a missing required field, an unknown field). Only the
// keywords the document uses are understood; an unknown one fails loudly, so a document
// change that this generator cannot follow is noticed instead of silently generating junk.

export type Schema = Record<string, any>;

// bodies stay small: the service's limits are tested elsewhere, here the shape matters
const MAX_ITEMS = 3;
const MAX_STRING = 24;

const KNOWN = new Set([
  '$ref', 'type', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', 'properties', 'required', 'additionalProperties', 'items',
  'prefixItems', 'minItems', 'maxItems', 'minLength', 'maxLength', 'pattern', 'format', 'minimum', 'maximum',
  'description', 'title', 'example', 'examples', 'contentMediaType', 'contentSchema', 'patternProperties', 'x-module-id',
]);

/** Strings that break parsers and validators that trust their input: control characters
 * (C0 and C1), a lone surrogate, bidi overrides, path tricks, NUL, very long text. */
const NASTY = [
  '', ' ', '\u0000', '\u0085', '\u009b', '\u001b[31m', '\ud800', '\u202e', '..', '../../etc/passwd', '%00', '%2e%2e%2f',
  '"', "'", '\\', '{}', '[]', 'null', '-1', '1e309', 'NaN', '0x10', '\n', '\r\n', 'a'.repeat(5000), '\u{1F600}',
];

const BAD_DATES = [
  '0000-01-01', '0000-01-01T00:00:00Z', '1999-12-31T23:59:59.999Z', '9999-12-31T23:59:59-23:59', '+275760-09-13T00:00:00Z',
  '-000001-01-01', '2026-02-30', '2026-13-01', '2026-11-01T25:00:00Z', '2026-11-01T00:00:00', '2026-11-01T00:00:00+24:00',
];

export class SchemaArbitraries {
  constructor(private readonly doc: Schema) {}

  /** Follows `#/...` references inside the document. */
  resolve(s: Schema): Schema {
    let seen = 0;
    while (s && typeof s.$ref === 'string') {
      if (++seen > 20) throw new Error(`reference loop at ${s.$ref}`);
      const parts = (s.$ref as string).replace(/^#\//, '').split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      s = parts.reduce((node: any, p) => node?.[p], this.doc);
      if (s === undefined) throw new Error('unresolved reference');
    }
    return s;
  }

  /** `allOf` of object schemas as one schema, for generation: properties merged key by key
   * (the later, narrower one wins: the document narrows CapturePacket this way), required
   * joined. Validation still uses the document as written. */
  private merged(s: Schema): Schema {
    if (!Array.isArray(s.allOf)) return s;
    const parts = [...(s.allOf as Schema[]).map((p) => this.merged(this.resolve(p))), Object.fromEntries(Object.entries(s).filter(([k]) => k !== 'allOf'))];
    const out: Schema = {};
    for (const part of parts) {
      for (const [k, v] of Object.entries(part)) {
        if (k === 'properties') {
          const props: Record<string, Schema> = { ...out.properties };
          for (const [name, sub] of Object.entries(v as Record<string, Schema>)) props[name] = props[name] ? { ...this.resolve(props[name]!), ...sub } : sub;
          out.properties = props;
        } else if (k === 'required') out.required = [...new Set([...(out.required ?? []), ...(v as string[])])];
        else out[k] = v;
      }
    }
    return out;
  }

  private check(s: Schema): void {
    for (const k of Object.keys(s)) if (!KNOWN.has(k)) throw new Error(`the generator does not understand the keyword ${k}`);
  }

  /** Values that fit `s`, boundaries and documented examples included. */
  valid(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
    const s = this.merged(this.resolve(schema));
    this.check(s);
    const examples: unknown[] = [s.example, ...(Array.isArray(s.examples) ? s.examples : [])].filter((e) => e !== undefined);
    const core = this.validCore(s, depth);
    return examples.length === 0 ? core : fc.oneof({ weight: 4, arbitrary: core }, { weight: 1, arbitrary: fc.constantFrom(...examples) });
  }

  private validCore(s: Schema, depth: number): fc.Arbitrary<unknown> {
    if ('const' in s) return fc.constant(s.const);
    if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
    const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
    if (branches) return fc.oneof(...branches.map((b) => this.valid(b, depth + 1)));
    const type = Array.isArray(s.type) ? s.type : [s.type];
    if (type.length > 1) return fc.oneof(...type.map((t: string) => this.validCore({ ...s, type: t }, depth)));
    switch (type[0]) {
      case 'null': return fc.constant(null);
      case 'boolean': return fc.boolean();
      case 'integer': {
        const min = s.minimum ?? -(2 ** 31);
        const max = s.maximum ?? 2 ** 31;
        // the edges of the range come often: that is where rules slip
        return fc.oneof(fc.integer({ min: Math.max(min, -Number.MAX_SAFE_INTEGER), max: Math.min(max, Number.MAX_SAFE_INTEGER) }), fc.constantFrom(...new Set([min, max, Math.min(max, Math.max(min, 0))])));
      }
      case 'number': {
        const min = s.minimum ?? -1e9;
        const max = s.maximum ?? 1e9;
        return fc.oneof(fc.double({ min, max, noNaN: true, noDefaultInfinity: true }), fc.constantFrom(min, max));
      }
      case 'string': return this.validString(s);
      case 'array': return this.validArray(s, depth);
      case 'object': return this.validObject(s, depth);
      case undefined: return fc.jsonValue({ maxDepth: 2 });
      default: throw new Error(`unknown type ${String(type[0])}`);
    }
  }

  private validString(s: Schema): fc.Arbitrary<string> {
    const minLength: number = s.minLength ?? 0;
    const maxLength: number = Math.min(s.maxLength ?? MAX_STRING, Math.max(minLength, MAX_STRING));
    if (s.format === 'date-time') {
      return fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T23:59:59Z'), noInvalidDate: true }).map((d) => d.toISOString());
    }
    if (s.format === 'date') {
      return fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
    }
    if (s.pattern) {
      const re = new RegExp(s.pattern as string, 'u');
      return fc.stringMatching(re).filter((v) => [...v].length >= minLength && [...v].length <= (s.maxLength ?? Infinity)).map((v) => v);
    }
    const chars = fc.oneof({ weight: 6, arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme-ascii' }) },
      { weight: 1, arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme' }) });
    // the longest string the schema allows, once in a while
    const longest = s.maxLength !== undefined ? [fc.constant('x'.repeat(s.maxLength as number))] : [];
    const shortest = minLength > 0 ? [fc.constant('x'.repeat(minLength))] : [];
    return fc.oneof(chars, ...longest, ...shortest);
  }

  private validArray(s: Schema, depth: number): fc.Arbitrary<unknown[]> {
    if (Array.isArray(s.prefixItems)) return fc.tuple(...(s.prefixItems as Schema[]).map((p) => this.valid(p, depth + 1)));
    const minLength = s.minItems ?? 0;
    const maxLength = Math.min(s.maxItems ?? MAX_ITEMS, Math.max(minLength, depth > 3 ? minLength : MAX_ITEMS));
    return fc.array(this.valid(s.items ?? {}, depth + 1), { minLength, maxLength });
  }

  private validObject(s: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
    const props = (s.properties ?? {}) as Record<string, Schema>;
    const required = new Set<string>(s.required ?? []);
    const record: Record<string, fc.Arbitrary<unknown>> = {};
    for (const [k, v] of Object.entries(props)) record[k] = this.valid(v, depth + 1);
    const fixed = fc.record(record, { requiredKeys: Object.keys(props).filter((k) => required.has(k)) });
    const extra = s.additionalProperties;
    if (extra === undefined || extra === false || depth > 3) return fixed;
    const more = fc.dictionary(fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme-ascii' }).filter((k) => !(k in props)),
      extra === true ? fc.jsonValue({ maxDepth: 1 }) : this.valid(extra as Schema, depth + 1), { maxKeys: 2 });
    return fc.tuple(fixed, more).map(([a, b]) => ({ ...b, ...a }));
  }

  /** Values that break `s` in one place (or a wrong type altogether). */
  invalid(schema: Schema, depth = 0): fc.Arbitrary<unknown> {
    const s = this.merged(this.resolve(schema));
    const wrongType = fc.oneof(
      fc.constantFrom<unknown>(null, true, 0, -1, 1.5, '', 'x', [], {}, 2 ** 53, -(2 ** 63)),
      fc.constantFrom(...NASTY),
      fc.jsonValue({ maxDepth: 2 }),
    );
    const out: fc.Arbitrary<unknown>[] = [wrongType];
    const branches = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
    if (branches && depth < 4) out.push(...branches.map((b) => this.invalid(b, depth + 1)));
    if (s.type === 'integer' || s.type === 'number') {
      if (s.minimum !== undefined) out.push(fc.constant(s.minimum - (s.type === 'integer' ? 1 : 0.5)));
      if (s.maximum !== undefined) out.push(fc.constant(s.maximum + 1));
      if (s.type === 'integer') out.push(fc.constantFrom(0.5, 1e21));
    }
    if (s.type === 'string') {
      if (s.maxLength !== undefined) out.push(fc.constant('y'.repeat((s.maxLength as number) + 1)));
      if (s.minLength) out.push(fc.constant('y'.repeat((s.minLength as number) - 1)));
      if (s.pattern || s.format) out.push(fc.constantFrom(...NASTY), fc.string({ maxLength: MAX_STRING, unit: 'binary' }));
      // dates a parser takes but a calendar does not, and years outside four digits
      if (s.format === 'date' || s.format === 'date-time') out.push(fc.constantFrom(...BAD_DATES));
    }
    if (s.type === 'array' && depth < 4) {
      const items = s.items && typeof s.items === 'object' ? s.items as Schema : undefined;
      if (items) out.push(fc.array(this.invalid(items, depth + 1), { minLength: 1, maxLength: 2 }));
      if (s.maxItems !== undefined) out.push(fc.array(items ? this.valid(items, depth + 1) : fc.constant(0), { minLength: s.maxItems + 1, maxLength: s.maxItems + 1 }));
      if (Array.isArray(s.prefixItems)) out.push(this.validArray(s, depth).map((a) => [...a, 0]), this.validArray(s, depth).map((a) => a.slice(1)));
    }
    if (s.type === 'object' && s.properties && depth < 4) {
      const props = s.properties as Record<string, Schema>;
      const names = Object.keys(props);
      const base = this.validObject(s, depth);
      if (names.length > 0) {
        // one field replaced by a value that breaks its own schema
        out.push(fc.tuple(base, fc.constantFrom(...names)).chain(([o, k]) => this.invalid(props[k]!, depth + 1).map((bad) => ({ ...o, [k]: bad }))));
      }
      if (s.required?.length) out.push(fc.tuple(base, fc.constantFrom(...(s.required as string[]))).map(([o, k]) => Object.fromEntries(Object.entries(o).filter(([n]) => n !== k))));
      if (s.additionalProperties === false) out.push(base.map((o) => ({ ...o, unexpected_field: 1 })));
    }
    return fc.oneof(...out);
  }

  /** Mostly valid (so requests get past the first check), sometimes invalid. */
  any(schema: Schema): fc.Arbitrary<unknown> {
    return fc.oneof({ weight: 3, arbitrary: this.valid(schema) }, { weight: 1, arbitrary: this.invalid(schema) });
  }
}
