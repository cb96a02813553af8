import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { color, moduleOf, request, sequence, single } from '../helpers/captures.ts';
import type { Schema, SchemaArbitraries } from './arbitrary.ts';

// One generated HTTP request per documented operation: path, query and header parameters
// from their schemas, a body from the request body's schema, and who sends it. `valid`
// records whether every part was drawn from the document's valid values, so a test can
// demand that the service accepts what its own document allows.

export type Auth = 'none' | 'bearer' | 'session' | 'session-no-csrf';
export const AUTHS: Auth[] = ['none', 'bearer', 'session', 'session-no-csrf'];

export interface GeneratedRequest {
  method: string;
  path: string;
  query: [string, string][];
  headers: Record<string, string>;
  body?: { bytes: Uint8Array | string; contentType: string | null };
  auth: Auth;
  /** every part drawn from the document's valid values */
  valid: boolean;
  /** what the body was, for reports (the bytes of a multipart body are not readable) */
  note?: string;
  /** verify: metadata drawn from the document's schema for the path's module */
  moduleTied?: boolean;
}

export interface Operation {
  method: string;
  path: string;
  op: Schema;
}

type Tagged = { value: unknown; ok: boolean };

const tagged = (gen: SchemaArbitraries, schema: Schema, validWeight = 3): fc.Arbitrary<Tagged> => fc.oneof(
  { weight: validWeight, arbitrary: gen.valid(schema).map((value) => ({ value, ok: true })) },
  { weight: 1, arbitrary: gen.invalid(schema).map((value) => ({ value, ok: false })) },
);

/** A parameter as text on the wire: JSON for structures, as is for the rest. */
const text = (v: unknown): string => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

/** A path segment: every byte of its UTF-8 but the unreserved ones percent-encoded, dots too
 * (a raw `..` would be another route to any URL parser), a lone surrogate as U+FFFD. */
const segment = (v: string) => [...Buffer.from(v, 'utf8')].map((b) => (/[A-Za-z0-9_~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');

// header values fetch can send (it throws on control characters and non-Latin-1)
const headerSafe = (v: string) => /^[\x20-\x7e]*$/.test(v) && v.trim() === v;

/** Values for the query that the document does not list. */
const strayQuery = fc.constantFrom<[string, string]>(['zz', '1'], ['limit', '10'], ['__proto__', 'x'], ['from', ''], ['cursor', '%']);

export function requestArbitrary(gen: SchemaArbitraries, o: Operation, verifyBodies: fc.Arbitrary<VerifyBody>): fc.Arbitrary<GeneratedRequest> {
  // a parameter's example sits beside its schema: drawn among the valid values (the
  // explicit-examples phase of Schemathesis)
  const params = ((o.op.parameters ?? []) as Schema[]).map((p) => gen.resolve(p))
    .map((p) => (p.example === undefined ? p : { ...p, schema: { ...gen.resolve(p.schema as Schema), example: p.example } }));
  const pathParams = params.filter((p) => p.in === 'path');
  const queryParams = params.filter((p) => p.in === 'query');
  const headerParams = params.filter((p) => p.in === 'header' && p.name.toLowerCase() !== 'x-csrf-token');

  // an empty segment makes a path of no operation (`/v1/modules//verify` is the router's
  // unknown-path 404, documented under `default`), so path values are never empty
  const pathArb = fc.tuple(...pathParams.map((p) => tagged(gen, p.schema, 6).filter((v) => text(v.value) !== ''))).map((vals) => {
    let path = o.path;
    vals.forEach((v, i) => (path = path.replace(`{${pathParams[i]!.name}}`, segment(text(v.value)))));
    return { path, ok: vals.every((v) => v.ok), values: Object.fromEntries(vals.map((v, i) => [pathParams[i]!.name, v.value])) };
  });
  const queryArb = fc.tuple(
    fc.tuple(...queryParams.map((p) => fc.option(tagged(gen, p.schema), { freq: 2 }))),
    fc.option(strayQuery, { freq: 6 }),
  ).map(([vals, stray]) => {
    const query: [string, string][] = [];
    vals.forEach((v, i) => v && query.push([queryParams[i]!.name, text(v.value)]));
    if (stray) query.push(stray);
    return { query, ok: vals.every((v) => !v || v.ok) && !stray };
  });
  const headerArb = fc.tuple(...headerParams.map((p) => fc.option(tagged(gen, p.schema).filter((v) => headerSafe(text(v.value))), { freq: 2 })))
    .map((vals) => {
      const headers: Record<string, string> = {};
      vals.forEach((v, i) => v && (headers[headerParams[i]!.name] = text(v.value)));
      return { headers, ok: vals.every((v) => !v || v.ok) };
    });

  const content = o.op.requestBody?.content as Record<string, Schema> | undefined;
  const jsonMedia = content?.['application/json'];
  const jsonSchema = jsonMedia ? { ...gen.resolve(jsonMedia.schema as Schema), ...(jsonMedia.example === undefined ? {} : { example: jsonMedia.example }) } : undefined;
  const bodyArb: fc.Arbitrary<{ body?: GeneratedRequest['body']; ok: boolean; note?: string; moduleFromBody?: string; tied?: boolean }> = jsonSchema
    ? fc.oneof(
      { weight: 8, arbitrary: tagged(gen, jsonSchema).map((v) => ({ body: { bytes: JSON.stringify(v.value) ?? '', contentType: 'application/json' }, ok: v.ok })) },
      // framing faults: not JSON, no body, another media type
      { weight: 1, arbitrary: fc.constantFrom('', '{', '{"a":', 'null', '[]', '"x"', '{"__proto__":{"x":1}}', '\u0000', '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]')
        .map((bytes) => ({ body: { bytes, contentType: 'application/json' }, ok: false })) },
      { weight: 1, arbitrary: gen.valid(jsonSchema).map((v) => ({ body: { bytes: JSON.stringify(v), contentType: 'text/plain' }, ok: false })) },
    )
    : content?.['multipart/form-data']
      ? verifyBodies.map((b) => ({ body: { bytes: b.bytes, contentType: b.contentType }, ok: false, note: b.note, moduleFromBody: b.moduleId, tied: b.tied }))
      : fc.constant({ ok: true });

  const security = (o.op.security ?? []) as Schema[];
  const needs: Auth = security.length === 0 ? 'none' : Object.keys(security[0]!)[0] === 'businessToken' ? 'bearer' : 'session';
  // the operation's own credentials most often, so that requests get past the guard
  const auth = fc.oneof({ weight: 3, arbitrary: fc.constant(needs) }, { weight: 2, arbitrary: fc.constantFrom(...AUTHS) });
  return fc.record({ path: pathArb, query: queryArb, headers: headerArb, body: bodyArb, auth }).map((r) => {
    const authOk = needs === 'none' || r.auth === needs;
    let path = r.path.path;
    // a well-formed capture is sent to its own module most of the time
    if (r.body.moduleFromBody && r.path.ok && r.path.values.module_id !== r.body.moduleFromBody) path = path.replace(segment(text(r.path.values.module_id)), r.body.moduleFromBody);
    return {
      method: o.method.toUpperCase(),
      path,
      ...(r.body.tied && r.path.ok ? { moduleTied: true } : {}),
      query: r.query.query,
      headers: r.headers.headers,
      ...(r.body.body ? { body: r.body.body } : {}),
      auth: r.auth,
      valid: r.path.ok && r.query.ok && r.headers.ok && r.body.ok && authOk,
      ...(r.body.note ? { note: r.body.note } : {}),
    };
  });
}

export interface VerifyBody {
  bytes: Uint8Array;
  contentType: string;
  note: string;
  /** set for a well-formed capture: the module its mode belongs to */
  moduleId?: string;
  /** the metadata was drawn from the document's schema for module `moduleId` */
  tied?: boolean;
}

/** Image descriptors (`{part, encoding, sha256}`) anywhere in generated metadata. */
function descriptors(node: unknown, out: Schema[] = []): Schema[] {
  if (Array.isArray(node)) node.forEach((n) => descriptors(n, out));
  else if (node && typeof node === 'object') {
    const o = node as Schema;
    if (typeof o.part === 'string' && 'sha256' in o) out.push(o);
    Object.values(o).forEach((n) => descriptors(n, out));
  }
  return out;
}

/** A multipart/form-data body: the metadata field first, then one file part per entry. The
 * client package's encoder refuses part names a header cannot carry; this one sends any name
 * (quotes and line breaks percent-encoded, as browsers do), because the server must cope. */
function encodeForm(metadata: string, files: Map<string, Uint8Array>): { bytes: Uint8Array; contentType: string } {
  const boundary = '----property-test-boundary-7d1f';
  const name = (n: string) => n.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const chunks: Buffer[] = [Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="metadata"\r\nContent-Type: application/json\r\n\r\n${metadata}\r\n`)];
  for (const [n, b] of files) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name(n)}"; filename="${name(n)}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`), Buffer.from(b), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { bytes: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** Multipart verify bodies from the document's description of the form: a `metadata` field
 * (JSON text whose schema is the field's contentSchema) and one file part per image.part.
 * The parts get bytes, and the descriptors the bytes' real SHA-256 most of the time, so that
 * checks beyond the hash (the image decoder) are reached too. A few valid captures (real
 * 320x320 crops) are mixed in, so the success path is fuzzed along with the refusals. */
export function verifyBodyArbitrary(gen: SchemaArbitraries, multipart: Schema): fc.Arbitrary<VerifyBody> {
  const form = gen.resolve(multipart.schema as Schema);
  const metadataSchema = (form.properties as Schema).metadata.contentSchema as Schema;
  // where the document gives one metadata schema per module (x-module-id), a valid draw is
  // sent to that module; otherwise the module is drawn apart from the metadata
  const perModule = ((gen.resolve(metadataSchema).anyOf ?? []) as Schema[]).map((b) => ({ schema: b, moduleId: gen.resolve(b)['x-module-id'] as string | undefined }))
    .filter((b) => b.moduleId !== undefined);
  const metadataArb: fc.Arbitrary<Tagged & { moduleId?: string }> = perModule.length > 0
    ? fc.oneof(...perModule.map((b) => tagged(gen, b.schema).map((v) => (v.ok ? { ...v, moduleId: b.moduleId } : v))))
    : tagged(gen, metadataSchema);
  const generated = fc.record({
    metadata: metadataArb,
    bytes: fc.array(fc.uint8Array({ minLength: 0, maxLength: 64 }), { minLength: 4, maxLength: 4 }),
    realHash: fc.boolean(),
    dropPart: fc.boolean(),
    extraPart: fc.option(fc.constantFrom('metadata', 'x', '', 'f0'), { freq: 4 }),
  }).map(({ metadata, bytes, realHash, dropPart, extraPart }) => {
    const files = new Map<string, Uint8Array>();
    descriptors(metadata.value).slice(0, 4).forEach((d, i) => {
      const b = bytes[i]!;
      if (realHash) d.sha256 = createHash('sha256').update(b).digest('hex');
      if (!(dropPart && i === 0)) files.set(String(d.part), b);
    });
    if (extraPart !== null) files.set(extraPart, new Uint8Array([1, 2, 3]));
    const body = encodeForm(JSON.stringify(metadata.value) ?? 'undefined', files);
    const tie = metadata.ok && metadata.moduleId ? { moduleId: metadata.moduleId, tied: true } : {};
    return { ...tie, bytes: body.bytes, contentType: body.contentType, note: `metadata ${JSON.stringify(metadata.value)?.slice(0, 600)}; parts ${[...files.keys()].join(',')}` };
  });
  const captures = [
    { note: 'valid rgb_single png', in: [single({ seed: 3 })] },
    { note: 'valid rgb_single rgb8', in: [single({ seed: 4, encoding: 'rgb8' })] },
    { note: 'valid rgb_sequence of 3', in: [sequence(3)] },
    { note: 'valid color', in: [color()] },
    { note: 'valid batch of two singles', in: [single({ id: 'a', seed: 5 }), single({ id: 'b', seed: 6 })] },
  ].map((c) => {
    const r = request(c.in);
    return { bytes: r.body, contentType: r.contentType, note: c.note, moduleId: moduleOf(c.in[0]!.mode) };
  });
  const valid = fc.constantFrom(...captures);
  // framing faults the multipart reader must refuse with a 4xx
  const broken = fc.tuple(valid, fc.nat(), fc.constantFrom('truncate', 'boundary', 'type', 'none')).map(([b, n, how]): VerifyBody => {
    if (how === 'truncate') return { ...b, bytes: b.bytes.subarray(0, n % b.bytes.length), note: `${b.note}, truncated`, moduleId: undefined };
    if (how === 'boundary') return { ...b, contentType: 'multipart/form-data; boundary=not-the-boundary', note: `${b.note}, wrong boundary`, moduleId: undefined };
    if (how === 'type') return { ...b, contentType: 'application/json', note: `${b.note}, as application/json`, moduleId: undefined };
    return { ...b, contentType: 'multipart/form-data', note: `${b.note}, no boundary`, moduleId: undefined };
  });
  return fc.oneof({ weight: 5, arbitrary: generated }, { weight: 2, arbitrary: valid }, { weight: 1, arbitrary: broken });
}
