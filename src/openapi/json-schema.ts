// TypeBox schemas as OpenAPI 3.1 (JSON Schema 2020-12) wants them. TypeBox still writes
// tuples in the draft-07 form (`items: [...]` with `additionalItems`), which 3.1 tools refuse;
// its Symbol keys are dropped by the JSON round trip.

import type { TSchema } from '@sinclair/typebox';

export type JsonSchema = Record<string, unknown>;

export function toJsonSchema(schema: TSchema | JsonSchema): JsonSchema {
  return convert(JSON.parse(JSON.stringify(schema))) as JsonSchema;
}

function convert(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(convert);
  if (node === null || typeof node !== 'object') return node;
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(node)) out[k] = convert(v);
  if (Array.isArray(out.items)) {
    out.prefixItems = out.items;
    // a closed tuple (TypeBox always closes them) admits nothing after the listed items
    out.items = out.additionalItems === undefined ? false : out.additionalItems;
    delete out.additionalItems;
  }
  return out;
}

/** Replaces every subschema equal to a named component by a $ref to it, largest first, so
 * that generated clients get one named type per shape instead of anonymous copies. */
export function referenceComponents(root: unknown, components: Record<string, JsonSchema>, skip?: string): unknown {
  const byText = new Map<string, string>();
  for (const [name, schema] of Object.entries(components)) {
    // only shapes worth a name: objects, unions and enums
    if (schema.type === 'object' || schema.anyOf || schema.enum) byText.set(JSON.stringify(schema), name);
  }
  const walk = (node: unknown, top: boolean): unknown => {
    if (Array.isArray(node)) return node.map((n) => walk(n, false));
    if (node === null || typeof node !== 'object') return node;
    if (!top) {
      const name = byText.get(JSON.stringify(node));
      if (name !== undefined && name !== skip) return { $ref: `#/components/schemas/${name}` };
    }
    const out: JsonSchema = {};
    for (const [k, v] of Object.entries(node)) {
      // keys of `properties` are names, not schemas; example values are data
      if (k === 'properties' && v && typeof v === 'object') {
        out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, walk(s, false)]));
      } else if (k === 'example' || k === 'examples' || k === 'enum' || k === 'const') {
        out[k] = v;
      } else {
        out[k] = walk(v, false);
      }
    }
    return out;
  };
  return walk(root, true);
}
