import t from 'tap';
import { createHash } from 'node:crypto';
import { buildBatch, buildCapture, encodeMultipart, toFormData } from '../../client/src/index.ts';
import { encodePng } from '../../src/images/png-encode.ts';
import { parseMetadata } from '../../src/packets/validate.ts';
import { checkParts } from '../../src/packets/parts.ts';

const rgb = (v: number) => new Uint8Array(307200).fill(v);
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const okFrame = (i: number, image: Uint8Array) => ({
  timestamp_us: 1_000 + i * 33_333, source_size: [720, 1280] as [number, number],
  eyes_xy: [[300, 500], [420, 505]] as [[number, number], [number, number]], image: { bytes: image },
});

t.test('buildCapture fills the protocol constants, the profile of the mode and every sha256', async (t) => {
  const png = encodePng(rgb(3));
  const raw = rgb(4);
  const { metadata, files } = await buildCapture({
    mode: 'rgb_sequence',
    frames: [okFrame(0, png), { timestamp_us: 40_000, status: 'dropped' }, okFrame(2, raw)],
  });
  t.equal(metadata.protocol_version, 1);
  t.equal(metadata.capture_profile, 'rgb_contiguous_v1');
  t.equal(metadata.preprocess_profile, 'eye_crop_320_v1');
  t.equal(metadata.complete, true);
  t.match(metadata.capture_id, /^[0-9a-f-]{36}$/);
  t.same(metadata.frames.map((f) => f.source_index), [0, 1, 2]);
  t.same(metadata.frames[0].image, { part: 'f0', encoding: 'png', sha256: sha(png) });
  t.same(metadata.frames[2].image, { part: 'f2', encoding: 'rgb8', sha256: sha(raw) });
  t.notOk('image' in metadata.frames[1]);
  t.same([...files.keys()], ['f0', 'f2']);
  const parsed = parseMetadata(JSON.stringify(metadata), 'rgb_liveness');
  const uploads = [...files].map(([name, b]) => ({ name, filename: 'x', size: b.length, sha256: sha(b) }));
  t.same(checkParts(parsed.images, uploads), [], 'the service accepts what the builder made');
  t.not((await buildCapture({ mode: 'rgb_single', frames: [] })).metadata.capture_id, (await buildCapture({ mode: 'rgb_single', frames: [] })).metadata.capture_id, 'a new capture, a new id');
});

t.test('the default encoding reads the whole PNG signature: rgb8 bytes that begin like one stay rgb8', async (t) => {
  // first pixel (137, 80, 78), then red 71: "\x89PNG", but not the 8-byte signature
  const raw = rgb(5);
  raw.set([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4]);
  const { metadata } = await buildCapture({ mode: 'rgb_single', frames: [okFrame(0, raw)] });
  t.equal(metadata.frames[0].image?.encoding, 'rgb8', 'it was sent as png, and refused 422 png_invalid_signature');
  const png = encodePng(rgb(6));
  t.equal((await buildCapture({ mode: 'rgb_single', frames: [okFrame(0, png)] })).metadata.frames[0].image?.encoding, 'png');
});

t.test('colour captures keep phase and display time; profiles follow the mode', async (t) => {
  const phases = ['white', 'red', 'green', 'blue'] as const;
  const { metadata } = await buildCapture({
    mode: 'color',
    frames: phases.map((phase, i) => ({ ...okFrame(i, rgb(i)), phase, display_time_us: 1_000 + i * 33_333 - 10 })),
  });
  t.equal(metadata.capture_profile, 'color_wrgb_v1');
  t.same(metadata.frames.map((f) => f.phase), phases);
  t.same(parseMetadata(JSON.stringify(metadata), 'color_liveness').images.length, 4);
  t.equal((await buildCapture({ mode: 'rgb_single', frames: [] })).metadata.capture_profile, 'rgb_single_v1');
});

t.test('buildBatch keeps part names unique across captures', async (t) => {
  const { metadata, files } = await buildBatch([
    { mode: 'rgb_single', capture_id: 'a', frames: [okFrame(0, rgb(1))] },
    { mode: 'rgb_sequence', capture_id: 'b', frames: [okFrame(0, rgb(2)), okFrame(1, rgb(3))] },
  ]);
  t.same([...files.keys()], ['c0.f0', 'c1.f0', 'c1.f1']);
  t.same(metadata.captures.map((c) => c.capture_id), ['a', 'b']);
  const parsed = parseMetadata(JSON.stringify(metadata), 'rgb_liveness');
  t.equal(parsed.batch, true);
  t.same(parsed.images.map((r) => r.part), ['c0.f0', 'c1.f0', 'c1.f1']);
  await t.rejects(buildCapture({ mode: 'rgb_sequence', frames: [
    { ...okFrame(0, rgb(1)), image: { bytes: rgb(1), part: 'x' } },
    { ...okFrame(1, rgb(1)), image: { bytes: rgb(1), part: 'x' } },
  ] }), /twice/);
});

t.test('encodeMultipart: metadata as a text field without filename, images as files, same bytes back', async (t) => {
  const png = encodePng(rgb(5));
  const raw = rgb(6);
  const { metadata, files } = await buildCapture({ mode: 'rgb_sequence', frames: [okFrame(0, png), okFrame(1, raw)] });
  const { body, contentType } = encodeMultipart(metadata, files);
  t.match(contentType, /^multipart\/form-data; boundary=----lvclient[0-9a-f]{24}$/);
  // An independent parser (undici's) reads it back.
  const form = await new Response(body, { headers: { 'content-type': contentType } }).formData();
  const meta = form.get('metadata');
  t.equal(typeof meta, 'string', 'metadata is a field, not a file');
  t.same(JSON.parse(meta as string), metadata);
  for (const [name, bytes] of files) {
    const file = form.get(name);
    t.ok(file instanceof Blob, `${name} is a file part`);
    t.ok(Buffer.from(await (file as Blob).arrayBuffer()).equals(Buffer.from(bytes)), `${name} bytes intact`);
  }
  t.equal([...form.keys()].length, 3, 'nothing extra');
  const head = Buffer.from(body.subarray(0, 200)).toString('latin1');
  t.match(head, /Content-Disposition: form-data; name="metadata"\r\n\r\n\{/);
  t.notMatch(head.split('\r\n\r\n')[0], /filename/);
  const other = encodeMultipart(metadata, files);
  t.not(other.contentType, contentType, 'a random boundary per body');
});

t.test('encodeMultipart refuses part names a multipart header cannot carry', async (t) => {
  for (const name of ['a"b', 'a\r\nb', 'a\\b', '', 'metadata']) {
    t.throws(() => encodeMultipart('{}', new Map([[name, new Uint8Array(1)]])), RangeError, JSON.stringify(name));
  }
  t.doesNotThrow(() => encodeMultipart('{}', new Map([['dir/frame 1.png', new Uint8Array(1)]])), 'slashes and spaces are fine');
});

t.test('toFormData carries the same fields and bytes as encodeMultipart', async (t) => {
  const png = encodePng(rgb(7));
  const { metadata, files } = await buildCapture({ mode: 'rgb_single', frames: [okFrame(0, png)] });
  const form = toFormData(metadata, files);
  t.same(JSON.parse(form.get('metadata') as string), metadata);
  const file = form.get('f0') as File;
  t.equal(file.type, 'image/png');
  t.equal(file.name, 'image.png');
  t.equal(sha(new Uint8Array(await file.arrayBuffer())), metadata.frames[0].image!.sha256);
  t.throws(() => toFormData(metadata, new Map([['metadata', png]])), RangeError);
});
