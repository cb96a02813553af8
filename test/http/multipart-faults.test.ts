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
import { body, expectRejected, multipart, post, smallPng, smallSingle } from '../helpers/ingest.ts';
import { sha256Hex } from '../../src/client/index.ts';

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());
const tok = await makeToken(server, ['rgb_liveness:10000:day']);

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
