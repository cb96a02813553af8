// Verify ingest over real HTTP, input level: capture and event counts at their edges, the
// multipart parts against the metadata, hashes, image encodings, one module per request, the
// FastAPI-style loc of each failure and all failures of a request in one answer. Every rejected
// request charges nothing and leaves only its audit line.
// The service's app and engine in process on a real LMDB store (test/helpers/api.ts; was one
// server start): the inputs are the app's rules, not the process's.

import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildCapture, buildVerifyBody, encodePng, sha256Hex, type CaptureInput } from '../../src/client/index.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import {
  RawConn, body, expectCleanOrClosed, expectRejected, flatPixels, multipart, okFrame, post, rawAnswer, smallColor, smallPng, smallSequence,
  smallSingle, verifyHead, type Answer,
} from '../helpers/ingest.ts';

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());
const tok = await makeToken(server, ['rgb_liveness:10000:day', 'color_liveness:10000:day']);

const reject422 = (t: Test, send: () => Promise<Answer>) => expectRejected(t, server, tok, send, { status: 422, code: 'invalid_input' });
const reject413 = (t: Test, send: () => Promise<Answer>) => expectRejected(t, server, tok, send, { status: 413, code: 'payload_too_large' });

const verify = (b: { body: Uint8Array; contentType: string }, module = 'rgb_liveness') => post(server.baseUrl, tok.token, b, { module });

// --- counts ------------------------------------------------------------------------------------

t.test('32 captures in one request are accepted; 33 are 413', async (t) => {
  const many = (n: number) => body(Array.from({ length: n }, (_, i) => smallSingle(`cap-${i}`)), { batch: true });
  const ok = await verify(many(32));
  t.equal(ok.status, 200, JSON.stringify(ok.json).slice(0, 300));
  t.equal(ok.json?.results?.length, 32);
  t.equal(ok.json?.charged_units, 32);
  const r = await reject413(t, () => verify(many(33)));
  t.match(r.json?.error?.message, /33 captures/);
});

t.test('256 events in one request are accepted; 257 are 413', async (t) => {
  const ok = await verify(body([smallSequence(128, { id: 'a' }), smallSequence(128, { id: 'b' })]));
  t.equal(ok.status, 200, JSON.stringify(ok.json).slice(0, 300));
  t.equal(ok.json?.results?.length, 2);
  // 128 + 128 + 1: no capture is over its own limit, the request is
  const r = await reject413(t, () => verify(body([smallSequence(128, { id: 'a' }), smallSequence(128, { id: 'b' }), smallSingle('c')])));
  t.match(r.json?.error?.message, /256 events/);
});

t.test('128 events in one capture are accepted; 129 are 413', async (t) => {
  const ok = await verify(body([smallSequence(128)]));
  t.equal(ok.status, 200, JSON.stringify(ok.json).slice(0, 300));
  t.equal(ok.json?.results?.[0]?.mode, 'rgb_sequence');
  const r = await reject413(t, () => verify(body([smallSequence(129)])));
  t.match(r.json?.error?.message, /129 events/);
});

t.test('an oversized batch is refused as soon as the metadata part ends, before the images are sent', async (t) => {
  const big = body(Array.from({ length: 33 }, (_, i) => smallSingle(`early-${i}`)), { batch: true });
  const boundary = big.contentType.split('boundary=')[1]!;
  // up to and just past the delimiter that ends the metadata part
  const metaEnd = big.body.indexOf(`\r\n--${boundary}`, 10);
  const cut = metaEnd + boundary.length + 4 + 10;
  let conn: RawConn | undefined;
  await reject413(t, async () => {
    conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead({ token: tok.token, contentType: big.contentType, contentLength: big.body.length }));
    await conn.write(big.body.subarray(0, cut));
    return rawAnswer(await conn.response());
  });
  // the client sends the rest anyway: drained (and the connection reusable) or closed, never parsed as a request
  await expectCleanOrClosed(t, conn!, big.body.subarray(cut));
  conn!.close();
});

// --- parts against the metadata -----------------------------------------------------------------

t.test('metadata sent as a file part (with a filename): 422 at ["body","metadata"]', async (t) => {
  const b = body([smallSingle()]);
  const m = multipart([{ name: 'metadata', filename: 'metadata.json', type: 'application/json', data: JSON.stringify(b.metadata) }, { name: 'f0', filename: 'f0.png', data: smallPng() }]);
  const r = await reject422(t, () => verify(m));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata'], 'metadata_not_text']]);
});

t.test('metadata missing: 422 at ["body","metadata"]', async (t) => {
  const m = multipart([{ name: 'f0', filename: 'f0.png', data: smallPng() }]);
  const r = await reject422(t, () => verify(m));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata'], 'missing']]);
});

t.test('an extra file part nobody references: 422 at ["body", <part name>]', async (t) => {
  const b = body([smallSingle()]);
  const files = new Map(b.files);
  files.set('stray.png', smallPng());
  const r = await reject422(t, () => verify(buildVerifyBody(b.metadata as never, files)));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'stray.png'], 'part_unreferenced']]);
});

t.test('a referenced part that was not uploaded: 422 at its image.part', async (t) => {
  const b = body([smallSequence(3, { okFrames: 2 })]);
  const files = new Map(b.files);
  files.delete('f2');
  const r = await reject422(t, () => verify(buildVerifyBody(b.metadata as never, files)));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 2, 'image', 'part'], 'part_missing']]);
});

t.test('the same image.part referenced twice: 422 at the second reference', async (t) => {
  const b = body([smallSequence(2, { okFrames: 2 })]);
  const meta = structuredClone(b.metadata) as any;
  meta.frames[1].image.part = 'f0';
  const files = new Map([['f0', b.files.get('f0')!]]);
  const r = await reject422(t, () => verify(buildVerifyBody(meta, files)));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 1, 'image', 'part'], 'duplicate_part']]);
});

t.test('the same file part uploaded twice: 422 at ["body", <part name>]', async (t) => {
  const b = body([smallSingle()]);
  const png = smallPng();
  const m = multipart([{ name: 'metadata', data: JSON.stringify(b.metadata) }, { name: 'f0', filename: 'a.png', data: png }, { name: 'f0', filename: 'b.png', data: png }]);
  const r = await reject422(t, () => verify(m));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'f0'], 'part_duplicate']]);
});

t.test('sha256 that does not match the uploaded bytes: 422 at the frame\'s image.sha256', async (t) => {
  const b = body([smallSequence(2, { okFrames: 2 })]);
  const files = new Map(b.files);
  const other = encodePng(new Uint8Array(320 * 320 * 3).fill(7));
  files.set('f1', other);
  const r = await reject422(t, () => verify(buildVerifyBody(b.metadata as never, files)));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 1, 'image', 'sha256'], 'sha256_mismatch']]);
  t.equal(r.json.detail[0].ctx?.actual, sha256Hex(other), 'ctx names the hash of what arrived');
});

t.test('more part rules: duplicate metadata, metadata not UTF-8, image sent as a text field, image.part "metadata", uppercase sha256', async (t) => {
  const b = body([smallSingle()]);
  const meta = JSON.stringify(b.metadata);
  const png = smallPng();
  await t.test('metadata twice', async (t) => {
    const r = await reject422(t, () => verify(multipart([{ name: 'metadata', data: meta }, { name: 'metadata', data: meta }, { name: 'f0', filename: 'a.png', data: png }])));
    t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata'], 'metadata_duplicate']]);
  });
  await t.test('metadata not UTF-8', async (t) => {
    const bad = Buffer.concat([Buffer.from(meta.slice(0, -1)), Buffer.from([0xff, 0xfe]), Buffer.from('}')]);
    const r = await reject422(t, () => verify(multipart([{ name: 'metadata', data: bad }, { name: 'f0', filename: 'a.png', data: png }])));
    t.same(r.json.detail.map((d: any) => d.loc), [['body', 'metadata']]);
  });
  await t.test('image sent as a text field (no filename)', async (t) => {
    const r = await reject422(t, () => verify(multipart([{ name: 'metadata', data: meta }, { name: 'f0', data: png }])));
    t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 0, 'image', 'part'], 'part_not_file']]);
  });
  await t.test('image.part named "metadata"', async (t) => {
    const m = structuredClone(b.metadata) as any;
    m.frames[0].image.part = 'metadata';
    const r = await reject422(t, () => verify(multipart([{ name: 'metadata', data: JSON.stringify(m) }])));
    t.same(r.json.detail.map((d: any) => d.loc), [['body', 'metadata', 'frames', 0, 'image', 'part']]);
  });
  await t.test('sha256 in uppercase hex', async (t) => {
    const m = structuredClone(b.metadata) as any;
    m.frames[0].image.sha256 = m.frames[0].image.sha256.toUpperCase();
    const r = await reject422(t, () => verify(multipart([{ name: 'metadata', data: JSON.stringify(m) }, { name: 'f0', filename: 'a.png', data: png }])));
    t.same(r.json.detail.map((d: any) => d.loc), [['body', 'metadata', 'frames', 0, 'image', 'sha256']]);
  });
});

t.test('part order and names: metadata after the images, names with folders and non-ASCII are accepted', async (t) => {
  const png = smallPng();
  const names = ['cam/0001 frame.png', 'k\u00fcche/\u00e9t\u00e9.png'];
  const built = body([{ mode: 'rgb_sequence', frames: names.map((part, i) => okFrame(i, png, { image: { bytes: png, part } })) }]);
  const r = await verify(multipart([...names.map((name) => ({ name, filename: 'x.png', data: png })), { name: 'metadata', data: JSON.stringify(built.metadata) }]));
  t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
});

// The document says the metadata part's own Content-Type is not read (any is served, as is
// none): review3 found the service served image/png where the document allowed only
// application/json and text/plain. What is read is the text, as UTF-8 JSON.
t.test('the metadata part\'s Content-Type is not read: none, JSON, text and image/png are served alike', async (t) => {
  const b = body([smallSingle()]);
  const meta = JSON.stringify(b.metadata);
  const png = smallPng();
  for (const type of [undefined, 'application/json', 'text/plain; charset=utf-8', 'image/png']) {
    const r = await verify(multipart([{ name: 'metadata', data: meta, ...(type ? { type } : {}) }, { name: 'f0', filename: 'a.png', data: png }]));
    t.equal(r.status, 200, `${type ?? 'no Content-Type'}: ${JSON.stringify(r.json).slice(0, 200)}`);
  }
  const doc = await (await fetch(`${server.baseUrl}/openapi.json`)).json();
  const form = doc.paths['/v1/modules/{module_id}/verify'].post.requestBody.content['multipart/form-data'];
  t.equal(form.encoding.metadata.contentType, '*/*', 'and the document allows any');
});

// --- image encodings ------------------------------------------------------------------------------

const px = flatPixels();
const px319 = new Uint8Array(319 * 320 * 3).fill(90);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]), Buffer.from('JFIF\0'), Buffer.alloc(2000, 0x11), Buffer.from([0xff, 0xd9])]);
const BAD_PNGS: [string, Uint8Array, string][] = [
  ['RGBA (colour type 6)', encodePng(px, 320, 320, { colorType: 6 }), 'png_unsupported_color_type'],
  ['palette (colour type 3)', encodePng(px, 320, 320, { colorType: 3 }), 'png_unsupported_color_type'],
  ['greyscale (colour type 0)', encodePng(px, 320, 320, { colorType: 0 }), 'png_unsupported_color_type'],
  ['16-bit RGB', encodePng(px, 320, 320, { bitDepth: 16 }), 'png_unsupported_bit_depth'],
  ['319x320', encodePng(px319, 319, 320), 'png_wrong_size'],
  ['bad CRC', encodePng(px, 320, 320, { corruptCrc: 'IDAT' }), 'png_invalid_crc'],
  ['JPEG bytes', JPEG, 'png_invalid_signature'],
];

/** A single capture whose one image is `bytes`, declared with `encoding` and its true sha256. */
function singleWith(bytes: Uint8Array, encoding: 'png' | 'rgb8') {
  return body([{ mode: 'rgb_single', frames: [okFrame(0, bytes, { image: { bytes, encoding } })] }]);
}

for (const [label, bytes, type] of BAD_PNGS) {
  t.test(`PNG variant refused: ${label} -> 422 ${type} at the frame's image`, async (t) => {
    const r = await reject422(t, () => verify(singleWith(bytes, 'png')));
    t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 0, 'image'], type]]);
  });
}

t.test('rgb8 of exactly 307200 bytes is accepted; 307199 and 307201 are 422', async (t) => {
  const ok = await verify(singleWith(new Uint8Array(307200).fill(90), 'rgb8'));
  t.equal(ok.status, 200, JSON.stringify(ok.json).slice(0, 300));
  for (const n of [307199, 307201]) {
    await t.test(`${n} bytes`, async (t) => {
      const r = await reject422(t, () => verify(singleWith(new Uint8Array(n).fill(90), 'rgb8')));
      t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'frames', 0, 'image'], 'rgb8_wrong_size']]);
      t.same(r.json.detail[0].ctx, { expected: 307200, actual: n });
    });
  }
});

t.test('PNG bytes declared as rgb8 and rgb8 bytes declared as png: 422', async (t) => {
  const a = await reject422(t, () => verify(singleWith(smallPng(), 'rgb8')));
  t.equal(a.json.detail[0].type, 'rgb8_wrong_size');
  const b = await reject422(t, () => verify(singleWith(new Uint8Array(307200), 'png')));
  t.equal(b.json.detail[0].type, 'png_invalid_signature');
});

// --- one module per request -----------------------------------------------------------------------

t.test('a batch mixing RGB and colour captures: 422 on either module', async (t) => {
  const mixed = body([smallSingle('rgb'), smallColor('col')]);
  const r = await reject422(t, () => verify(mixed, 'rgb_liveness'));
  t.same(r.json.detail.map((d: any) => d.loc), [['body', 'metadata', 'captures', 1, 'mode']]);
  const c = await reject422(t, () => verify(mixed, 'color_liveness'));
  t.same(c.json.detail.map((d: any) => d.loc), [['body', 'metadata', 'captures', 0, 'mode']]);
  const ok = await verify(body([smallSingle('s'), smallSequence(3, { id: 'q' })]), 'rgb_liveness');
  t.equal(ok.status, 200, 'rgb_single and rgb_sequence may share a request');
});

// --- loc and all errors at once --------------------------------------------------------------------

t.test('image failures inside a batch carry the capture index in loc', async (t) => {
  const bad = smallSingle('second');
  bad.frames[0] = okFrame(0, encodePng(px, 320, 320, { corruptCrc: 'IHDR' }));
  const r = await reject422(t, () => verify(body([smallSingle('first'), bad])));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'captures', 1, 'frames', 0, 'image'], 'png_invalid_crc']]);
});

t.test('loc points at the offending field: ["body","metadata","captures",0,"frames",3,"eyes_xy"]', async (t) => {
  const seq: CaptureInput = smallSequence(5, { okFrames: 5 });
  seq.frames[3] = { ...seq.frames[3]!, eyes_xy: [[360, 200], [280, 202]] };
  const r = await reject422(t, () => verify(body([seq, smallSingle()])));
  t.same(r.json.detail.map((d: any) => [d.loc, d.type]), [[['body', 'metadata', 'captures', 0, 'frames', 3, 'eyes_xy'], 'eyes_not_sorted']]);
});

t.test('all errors of a request are reported at once', async (t) => {
  await t.test('two bad frames in the metadata: two items', async (t) => {
    const seq: CaptureInput = smallSequence(5, { okFrames: 5 });
    seq.frames[1] = { ...seq.frames[1]!, eyes_xy: [[360, 200], [280, 202]] };
    seq.frames[4] = { ...seq.frames[4]!, timestamp_us: 1 };
    const r = await reject422(t, () => verify(body([seq])));
    t.same(r.json.detail.map((d: any) => d.loc), [['body', 'metadata', 'frames', 1, 'eyes_xy'], ['body', 'metadata', 'frames', 4, 'timestamp_us']]);
  });
  await t.test('two bad images (hash and decode) plus an extra part: three items', async (t) => {
    const b = body([smallSequence(4, { okFrames: 4 })]);
    const files = new Map(b.files);
    files.set('f1', encodePng(new Uint8Array(320 * 320 * 3).fill(3))); // not the declared hash
    const meta = structuredClone(b.metadata) as any;
    const rgba = encodePng(px, 320, 320, { colorType: 6 });
    files.set('f3', rgba);
    meta.frames[3].image.sha256 = sha256Hex(rgba); // hash right, encoding wrong
    files.set('extra', smallPng());
    const r = await reject422(t, () => verify(buildVerifyBody(meta, files)));
    const got = r.json.detail.map((d: any) => [d.loc, d.type]).sort((x: any, y: any) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
    t.same(got, [
      [['body', 'extra'], 'part_unreferenced'],
      [['body', 'metadata', 'frames', 1, 'image', 'sha256'], 'sha256_mismatch'],
      [['body', 'metadata', 'frames', 3, 'image'], 'png_unsupported_color_type'],
    ].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))));
  });
});

t.test('a capture of failure events only still needs multipart and is accepted', async (t) => {
  const only = buildCapture({ mode: 'rgb_sequence', complete: false, frames: [{ timestamp_us: 1, status: 'dropped' }, { timestamp_us: 2, status: 'face_unavailable' }] });
  const r = await verify(buildVerifyBody(only.metadata, only.files));
  t.equal(r.status, 200, JSON.stringify(r.json).slice(0, 300));
  t.equal(r.json?.results?.[0]?.status, 'retry');
});

t.test('a demo token\'s rejected uploads are not archived (only accepted ones are)', async (t) => {
  const demo = await makeToken(server, ['rgb_liveness:100:day'], ['--demo']);
  const archived = (): string[] => {
    const root = path.join(server.dataDir, 'archive');
    if (!fs.existsSync(root)) return [];
    return fs.readdirSync(root).flatMap((day) => fs.readdirSync(path.join(root, day)));
  };
  const before = archived();
  const sent: Answer[] = [];
  sent.push(await post(server.baseUrl, demo.token, singleWith(new Uint8Array(307199), 'rgb8')));
  sent.push(await post(server.baseUrl, demo.token, body(Array.from({ length: 33 }, () => smallSingle()), { batch: true })));
  sent.push(await post(server.baseUrl, demo.token, multipart([{ name: 'f0', filename: 'a.png', data: smallPng() }])));
  t.same(sent.map((a) => a.status), [422, 413, 422]);
  t.same(archived(), before, 'nothing archived for the rejected calls');
  const ok = await post(server.baseUrl, demo.token, body([smallSingle()]));
  t.equal(ok.status, 200);
  t.same(archived().filter((d) => !before.includes(d)), [ok.requestId], 'the accepted call is archived under its request id');
});

