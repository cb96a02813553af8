import { ServiceError, ValidationFailure } from '../errors/index.ts';
import type { HttpContext } from './context.ts';
import { ClientGoneError } from '../verify/index.ts';

/** Declared Content-Length, checked before any byte is read: malformed -> 400, above the
 * body limit -> 413. Absent (chunked) bodies are counted while they stream. */
export function checkContentLength(ctx: HttpContext, maxBodyBytes: number): void {
  const raw = ctx.headers['content-length'];
  if (raw === undefined) return;
  if (!/^\d{1,16}$/.test(raw.trim())) throw new ServiceError('invalid_content_length', `Content-Length ${JSON.stringify(raw.slice(0, 40))} is not a single decimal length`);
  if (Number(raw) > maxBodyBytes) throw new ServiceError('payload_too_large', `The body of ${raw} bytes exceeds the ${maxBodyBytes}-byte limit`);
}

/** Buffers a small body (admin and login JSON). Must be called before the handler's first
 * await. The limit is enforced per chunk, so an oversized body is refused as it crosses it. */
export function readBody(ctx: HttpContext, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    try {
      checkContentLength(ctx, limit);
    } catch (err) {
      reject(err);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    // the client left (or uWS's idle timer closed a stalled body): nobody to answer, no failure
    ctx.onAbort(() => reject(new ClientGoneError('client disconnected during the body')));
    ctx.readBody((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > limit) {
        failed = true;
        ctx.bodyAbandoned = true;
        reject(new ServiceError('payload_too_large', `body exceeds ${limit} bytes`));
        return;
      }
      // uWS detaches the ArrayBuffer when this callback returns: copy it.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    });
  });
}

// FastAPI's rule, which the 422 format follows: a body without a Content-Type, or with a JSON
// type (application/json, application/*+json), is read as JSON; any other type makes the body
// invalid (contract: malformed body -> 422). An HTML form cannot leave the type out, so a
// cross-site form still cannot post a login.
const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Reads and parses a JSON body; a wrong type or malformed JSON is a 422 like any other body error. */
export async function readJson(ctx: HttpContext, limit = 64 * 1024): Promise<unknown> {
  const body = readBody(ctx, limit);
  const type = (ctx.headers['content-type'] ?? '').trim();
  const buf = await body;
  if (buf.length > 0 && type !== '' && !JSON_TYPE.test(type)) {
    throw new ValidationFailure([{ loc: ['body'], msg: 'The body must be JSON: send Content-Type application/json', type: 'json_type', input: type.slice(0, 100) }]);
  }
  try {
    // strict: JSON is UTF-8 (RFC 8259); a lenient decode turned invalid bytes into U+FFFD, so a
    // name was stored otherwise than sent and different password bytes became one password.
    // A BOM is kept, so JSON.parse refuses it as before.
    return buf.length === 0 ? undefined : JSON.parse(STRICT_UTF8.decode(buf));
  } catch (e) {
    if (e instanceof TypeError) throw new ValidationFailure([{ loc: ['body'], msg: 'JSON decode error: the body is not valid UTF-8', type: 'json_invalid' }]);
    throw new ValidationFailure([{ loc: ['body'], msg: `JSON decode error: ${(e as Error).message}`, type: 'json_invalid' }]);
  }
}
