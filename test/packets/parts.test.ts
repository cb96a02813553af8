import t from 'tap';
import { brief, fakeSha, issuesOf, sequence, single } from './fixtures/metadata.ts';
import { parseMetadata } from '../../src/packets/validate.ts';
import { checkMetadataPart, checkParts } from '../../src/packets/parts.ts';
import type { ImageRef, UploadedPart } from '../../src/packets/types.ts';

t.test('image.part is unique across the request', async (t) => {
  const a = single();
  const b = sequence(2);
  b.frames[1].image.part = a.frames[0].image.part;
  const issues = issuesOf({ captures: [a, b] });
  t.same(brief(issues), ['body.metadata.captures.1.frames.1.image.part:duplicate_part']);
  t.same(issues[0].ctx, { first_loc: ['body', 'metadata', 'captures', 0, 'frames', 0, 'image'] });
  const within = sequence(3);
  within.frames[2].image.part = within.frames[0].image.part;
  t.same(brief(issuesOf(within)), ['body.metadata.frames.2.image.part:duplicate_part']);
});

t.test("image.part 'metadata' is reserved; an empty part name is rejected", async (t) => {
  const s = single();
  s.frames[0].image.part = 'metadata';
  t.same(brief(issuesOf(s)), ['body.metadata.frames.0.image.part:part_reserved']);
  s.frames[0].image.part = '';
  t.same(brief(issuesOf(s)), ['body.metadata.frames.0.image.part:string_too_short']);
});

function refsOf(metadata: unknown): ImageRef[] {
  return parseMetadata(JSON.stringify(metadata), 'rgb_liveness').images;
}

function uploadsFor(refs: ImageRef[]): UploadedPart[] {
  return refs.map((r) => ({ name: r.part, filename: 'image.png', size: 100, sha256: r.sha256 }));
}

t.test('matching parts and hashes pass', async (t) => {
  const refs = refsOf(sequence(3));
  t.same(checkParts(refs, uploadsFor(refs)), []);
  t.same(checkParts(refs, uploadsFor(refs).reverse()), [], 'order of parts does not matter');
});

t.test('a referenced part that was not uploaded', async (t) => {
  const refs = refsOf(sequence(3));
  const issues = checkParts(refs, uploadsFor(refs).slice(1));
  t.same(brief(issues), ['body.metadata.frames.0.image.part:part_missing']);
});

t.test('an uploaded part nobody references', async (t) => {
  const refs = refsOf(sequence(2));
  const uploads = [...uploadsFor(refs), { name: 'stray', filename: 'x.png', size: 1, sha256: fakeSha(1) }];
  t.same(brief(checkParts(refs, uploads)), ['body.stray:part_unreferenced']);
  const text = [...uploadsFor(refs), { name: 'note', filename: null, size: 1, sha256: fakeSha(1) }];
  t.same(brief(checkParts(refs, text)), ['body.note:part_unreferenced'], 'extra text fields too');
  const onlyFailures = refsOf(single({ frames: [{ source_index: 0, timestamp_us: 0, status: 'dropped' }] }));
  t.same(onlyFailures, []);
  t.same(brief(checkParts(onlyFailures, [{ name: 'f0', filename: 'a', size: 1, sha256: fakeSha(2) }])), ['body.f0:part_unreferenced']);
});

t.test('a part name uploaded twice', async (t) => {
  const refs = refsOf(single());
  const uploads = [...uploadsFor(refs), ...uploadsFor(refs)];
  const issues = checkParts(refs, uploads);
  t.same(brief(issues), [`body.${refs[0].part}:part_duplicate`]);
  t.same(issues[0].ctx, { count: 2 });
});

t.test('a referenced part sent as a text field', async (t) => {
  const refs = refsOf(single());
  const uploads = uploadsFor(refs).map((u) => ({ ...u, filename: null }));
  t.same(brief(checkParts(refs, uploads)), ['body.metadata.frames.0.image.part:part_not_file']);
});

t.test('sha256 must equal the hash of the streamed bytes', async (t) => {
  const refs = refsOf(sequence(2));
  const uploads = uploadsFor(refs);
  uploads[1].sha256 = fakeSha(999_999);
  const issues = checkParts(refs, uploads);
  t.same(brief(issues), ['body.metadata.frames.1.image.sha256:sha256_mismatch']);
  t.equal(issues[0].input, refs[1].sha256);
  t.equal(issues[0].ctx?.actual, fakeSha(999_999));
  // A declared hash in upper case never matches: the spec asks for lowercase hex, and the
  // schema already refuses it before parts are compared.
  const upper = single();
  upper.frames[0].image.sha256 = fakeSha(5).toUpperCase().replace(/0/g, 'A');
  t.same(brief(issuesOf(upper)), ['body.metadata.frames.0.image.sha256:string_pattern_mismatch']);
});

t.test('file names do not identify parts', async (t) => {
  const refs = refsOf(single());
  const uploads = [{ name: 'other', filename: refs[0].part, size: 1, sha256: refs[0].sha256 }];
  t.same(brief(checkParts(refs, uploads)).sort(), ['body.metadata.frames.0.image.part:part_missing', 'body.other:part_unreferenced']);
});

t.test('metadata: exactly one text field without filename', async (t) => {
  t.same(checkMetadataPart([{ name: 'metadata', filename: null }, { name: 'f0', filename: 'a.png' }]), []);
  t.same(brief(checkMetadataPart([{ name: 'f0', filename: 'a.png' }])), ['body.metadata:missing']);
  t.same(brief(checkMetadataPart([{ name: 'metadata', filename: 'meta.json' }])), ['body.metadata:metadata_not_text']);
  t.same(brief(checkMetadataPart([{ name: 'metadata', filename: null }, { name: 'metadata', filename: null }])), ['body.metadata:metadata_duplicate']);
  t.same(brief(checkMetadataPart([{ name: 'Metadata', filename: null }])), ['body.metadata:missing'], 'names are case-sensitive');
});
