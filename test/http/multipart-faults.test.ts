// Review 3 over real HTTP: what a verify call whose multipart framing a standard encoder would
// not produce is answered.
// F5: a multipart/form-data Content-Type without a usable boundary is still 415
//     unsupported_media_type (interface-spec.md "Errors"), its message naming the fault and that
//     the HTTP library generates the Content-Type.
// F6: part names that standard encoders cannot send as they are (`"`, `\`, CR, LF) are refused
//     in image.part with a clear 422; a part name that is not UTF-8 is a 422 naming it.
// Every refusal charges nothing (expectRejected checks the audit line and the usage).

import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { body, expectRejected, post, smallPng, smallSingle } from '../helpers/ingest.ts';
import { sha256Hex } from '../../src/client/index.ts';

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());
const tok = await makeToken(server, ['rgb_liveness:10000:day']);
// no unit left: a refusal of the metadata comes before the quota (429)
const spent = await makeToken(server, ['rgb_liveness:0:day']);

t.test('F5: multipart/form-data without a usable boundary: 415, the message names the fault', async (t) => {
  const good = body([smallSingle('ct')]);
  const boundary = good.contentType.split('boundary=')[1]!;
  const cases: [string, RegExp][] = [
    ['multipart/form-data', /has no boundary parameter/],
    [`multipart/form-data; boundary=${boundary}; boundary=${boundary}`, /more than one boundary parameter/],
    [`multipart/form-data; boundary=${'b'.repeat(71)}`, /boundary of the multipart\/form-data Content-Type is invalid: RFC 2046 allows 1 to 70 characters/],
    ['multipart/form-data boundary=x', /parameters of the multipart\/form-data Content-Type cannot be read/],
  ];
  for (const [contentType, message] of cases) {
    await t.test(contentType.slice(0, 60), async (t) => {
      const r = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, { body: good.body, contentType }), { status: 415, code: 'unsupported_media_type' });
      t.match(r.json?.error?.message, message);
      t.match(r.json?.error?.message, /let the HTTP library generate the Content-Type, boundary included/, 'and how to get it right');
    });
  }
  const json = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, { body: good.body, contentType: 'application/json' }), { status: 415, code: 'unsupported_media_type' });
  t.equal(json.json?.error?.message, 'The body must be multipart/form-data', 'not multipart at all: as before');
});

const PNG = smallPng();

/** One rgb_single capture whose image is `part`, as JSON text. */
function metadata(part: string): string {
  return JSON.stringify({
    protocol_version: 1, capture_id: 'names', mode: 'rgb_single', capture_profile: 'rgb_single_v1', preprocess_profile: 'eye_crop_320_v1', complete: true,
    frames: [{ source_index: 0, timestamp_us: 1_000_000, status: 'ok', source_size: [640, 480], eyes_xy: [[280, 200], [360, 202]], image: { part, encoding: 'png', sha256: sha256Hex(PNG) } }],
  });
}

/** A multipart body written byte by byte: `header` is the file part's Content-Disposition
 * parameters as raw bytes, as an encoder would write them. */
function rawBody(meta: string, header: Buffer): { body: Buffer; contentType: string } {
  const b = 'rawNamesBoundary01';
  return {
    body: Buffer.concat([
      Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n${meta}\r\n--${b}\r\nContent-Disposition: form-data; `),
      header, Buffer.from('\r\nContent-Type: image/png\r\n\r\n'), PNG, Buffer.from(`\r\n--${b}--\r\n`),
    ]),
    contentType: `multipart/form-data; boundary=${b}`,
  };
}

t.test('F6: an image.part with ", CR, LF or two backslashes in a row, or ending with a backslash, is refused by name, before the quota', async (t) => {
  // what WHATWG FormData (browsers, undici) and curl write for each name (review3b: a raw `\\`
  // reads as one backslash, and a raw backslash at the end escapes the closing quote)
  const cases: [string, string][] = [
    ['dir\\\\f0', 'name="dir\\\\f0"'],
    ['C:\\frames\\', 'name="C:\\frames\\"'],
    ['cam"0', 'name="cam%220"'],
    ['cam\r\n0', 'name="cam%0D%0A0"'],
    ['cam\n0', 'name="cam%0A0"'],
  ];
  for (const [part, header] of cases) {
    await t.test(JSON.stringify(part), async (t) => {
      for (const who of [tok, spent]) {
        const r = await expectRejected(t, server, who, () => post(server.baseUrl, who.token, rawBody(metadata(part), Buffer.from(`${header}; filename="a.png"`))), { status: 422, code: 'invalid_input' });
        t.same(r.json?.detail?.map((d: { loc: unknown[]; type: string }) => [d.loc.join('.'), d.type]), [['body.metadata.frames.0.image.part', 'part_name_unsendable']], 'one item, at the field');
        t.match(r.json?.detail?.[0]?.msg, /must not contain a double quote, CR, LF or two backslashes in a row, nor end with a backslash: standard multipart encoders/);
        t.equal(r.json?.detail?.[0]?.input, part);
      }
    });
  }
});

// A backslash in a part name arrives whole from both kinds of encoder: browsers, undici and
// curl send it raw, Python's urllib3 and httpx escape it as \\ (src/http/multipart/syntax.ts).
// It was read as a quoted-pair escape, so the raw form lost it (`cam\f0` arrived as `camf0`).
t.test('a backslash in image.part (a Windows-style folder prefix) matches the part, sent raw or escaped', async (t) => {
  for (const [who, header] of [['browsers, undici, curl', 'name="C:\\frames\\f0.png"'], ['urllib3, httpx', 'name="C:\\\\frames\\\\f0.png"']] as const) {
    const r = await post(server.baseUrl, tok.token, rawBody(metadata('C:\\frames\\f0.png'), Buffer.from(`${header}; filename="f0.png"`)));
    t.equal(r.status, 200, `${who}: ${JSON.stringify(r.json).slice(0, 300)}`);
  }
});

t.test('F6: a part name that is not UTF-8 is a 422 saying so', async (t) => {
  const bad = Buffer.concat([Buffer.from('name="cam'), Buffer.from([0xff, 0xfe]), Buffer.from('0"; filename="a.png"')]);
  const r = await expectRejected(t, server, tok, () => post(server.baseUrl, tok.token, rawBody(metadata('cam\ufffd\ufffd0'), bad)), { status: 422, code: 'invalid_input' });
  t.same(r.json?.detail?.map((d: { loc: unknown[]; type: string }) => [d.loc.join('.'), d.type]), [['body', 'multipart_invalid']], 'one item, not part_missing + part_unreferenced');
  t.match(r.json?.detail?.[0]?.msg, /has a name \(Content-Disposition name=\) that is not valid UTF-8/);

  // UTF-8 names still match, and a file name's bytes (which identify nothing) are not judged
  const utf8 = await post(server.baseUrl, tok.token, rawBody(metadata('caméra-0'), Buffer.from('name="caméra-0"; filename="a.png"')));
  t.equal(utf8.status, 200, JSON.stringify(utf8.json).slice(0, 300));
  const fileName = Buffer.concat([Buffer.from('name="cam0"; filename="a'), Buffer.from([0xff]), Buffer.from('.png"')]);
  const named = await post(server.baseUrl, tok.token, rawBody(metadata('cam0'), fileName));
  t.equal(named.status, 200, JSON.stringify(named.json).slice(0, 300));
});
