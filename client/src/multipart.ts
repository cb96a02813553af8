// multipart/form-data body of a verify request (interface-spec.md "Request body"): the
// `metadata` text field without filename, then one file part per image, named by image.part.
// Encoded by hand into one byte array, rather than left to FormData, so that a retry resends
// exactly the same bytes and the body's length is known before sending; only TextEncoder and
// Web Crypto are used, so it runs unchanged in Node and in browsers.

import { isPng } from './builder.ts';
import type { BatchEnvelope, CapturePacket } from './wire.ts';

export interface MultipartBody {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
}

// A quote, backslash or line break in a part name has no single agreed escaping in
// Content-Disposition, so such a name could reach the server as a different name.
const UNSENDABLE = /["\\\r\n]/;
const utf8 = new TextEncoder();

function checkPartNames(files: ReadonlyMap<string, Uint8Array>): void {
  for (const name of files.keys()) {
    if (UNSENDABLE.test(name) || name.length === 0) {
      throw new RangeError(`encodeMultipart: part name ${JSON.stringify(name)} cannot be sent in a multipart header`);
    }
    if (name === 'metadata') throw new RangeError("encodeMultipart: 'metadata' is the metadata field, not a file part");
  }
}

function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  const first = needle[0];
  const last = haystack.length - needle.length;
  outer: for (let i = haystack.indexOf(first!); i !== -1 && i <= last; i = haystack.indexOf(first!, i + 1)) {
    for (let k = 1; k < needle.length; k++) if (haystack[i + k] !== needle[k]) continue outer;
    return true;
  }
  return false;
}

function randomBoundary(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(12));
  let hex = '';
  for (const b of bytes) hex += b.toString(16).padStart(2, '0');
  return `----lvclient${hex}`;
}

export function encodeMultipart(metadata: CapturePacket | BatchEnvelope | string, files: ReadonlyMap<string, Uint8Array>): MultipartBody {
  const json = utf8.encode(typeof metadata === 'string' ? metadata : JSON.stringify(metadata));
  checkPartNames(files);

  let boundary = '';
  // 96 random bits make a collision with content practically impossible; checking costs one
  // scan and makes it impossible.
  for (;;) {
    boundary = randomBoundary();
    const needle = utf8.encode(boundary);
    if (!contains(json, needle) && [...files.values()].every((b) => !contains(b, needle))) break;
  }

  const chunks: Uint8Array[] = [
    utf8.encode(`--${boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n`),
    json,
  ];
  for (const [name, bytes] of files) {
    const png = isPng(bytes);
    chunks.push(utf8.encode(
      `\r\n--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${png ? 'image.png' : 'image.rgb'}"\r\n`
      + `Content-Type: ${png ? 'image/png' : 'application/octet-stream'}\r\n\r\n`));
    chunks.push(bytes);
  }
  chunks.push(utf8.encode(`\r\n--${boundary}--\r\n`));
  const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.length;
  }
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The same request as a FormData, for code that hands bodies to fetch or XMLHttpRequest
 * itself; the boundary is then the platform's, new on each send. */
export function toFormData(metadata: CapturePacket | BatchEnvelope | string, files: ReadonlyMap<string, Uint8Array>): FormData {
  checkPartNames(files);
  const form = new FormData();
  form.append('metadata', typeof metadata === 'string' ? metadata : JSON.stringify(metadata));
  for (const [name, bytes] of files) {
    const png = isPng(bytes);
    const view = bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
    const blob = new Blob([view], { type: png ? 'image/png' : 'application/octet-stream' });
    form.append(name, blob, png ? 'image.png' : 'image.rgb');
  }
  return form;
}
