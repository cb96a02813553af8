// multipart/form-data body of a verify request (interface-spec.md "Request body"): the
// `metadata` text field without filename, then one file part per image, named by image.part.
// Built into one Buffer so a retry resends exactly the same bytes.

import { randomBytes } from 'node:crypto';
import type { BatchEnvelope, CapturePacket } from '../packets/types.ts';
import { isPng } from './builder.ts';

export interface VerifyBody {
  body: Buffer;
  contentType: string;
}

// A quote, backslash or line break in a part name has no single agreed escaping in
// Content-Disposition, so such a name could reach the server as a different name.
const UNSENDABLE = /["\\\r\n]/;

export function buildVerifyBody(metadata: CapturePacket | BatchEnvelope | string, files: ReadonlyMap<string, Uint8Array>): VerifyBody {
  const json = Buffer.from(typeof metadata === 'string' ? metadata : JSON.stringify(metadata), 'utf8');
  for (const name of files.keys()) {
    if (UNSENDABLE.test(name) || name.length === 0) {
      throw new RangeError(`buildVerifyBody: part name ${JSON.stringify(name)} cannot be sent in a multipart header`);
    }
    if (name === 'metadata') throw new RangeError("buildVerifyBody: 'metadata' is the metadata field, not a file part");
  }

  let boundary = '';
  // 96 random bits make a collision with content practically impossible; checking costs one
  // scan and makes it impossible.
  for (;;) {
    boundary = `----lvclient${randomBytes(12).toString('hex')}`;
    const needle = Buffer.from(boundary, 'latin1');
    if (!json.includes(needle) && [...files.values()].every((b) => !Buffer.from(b.buffer, b.byteOffset, b.byteLength).includes(needle))) break;
  }

  const chunks: Uint8Array[] = [
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n`, 'utf8'),
    json,
  ];
  for (const [name, bytes] of files) {
    const png = isPng(bytes);
    chunks.push(Buffer.from(
      `\r\n--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${png ? 'image.png' : 'image.rgb'}"\r\n`
      + `Content-Type: ${png ? 'image/png' : 'application/octet-stream'}\r\n\r\n`, 'utf8'));
    chunks.push(bytes);
  }
  chunks.push(Buffer.from(`\r\n--${boundary}--\r\n`, 'latin1'));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
