import { ServiceError } from '../errors/index.ts';
import { ClientGoneError } from '../verify/index.ts';
import type { HttpContext } from './context.ts';
import { MultipartError, MultipartParser, type ReceivedPart } from './multipart/index.ts';
import type { UploadPacer } from './upload-pace.ts';

export interface UploadLimits {
  maxBodyBytes: number;
  maxPartBytes: number;
  maxParts: number;
  maxHeaderBytes: number;
}

/** Streams a multipart body through the incremental parser: each chunk is copied (uWS
 * detaches it on return), hashed and split into parts as it arrives, and a limit fails the
 * upload in the very chunk that crosses it. Must be called before the handler's first await. */
export function receiveMultipart(
  ctx: HttpContext,
  boundary: string,
  limits: UploadLimits,
  onPartEnd?: (part: ReceivedPart) => void,
  pacer?: UploadPacer,
): Promise<ReceivedPart[]> {
  return new Promise((resolve, reject) => {
    const parser = new MultipartParser(boundary, limits, { onPartEnd });
    let received = 0;
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      pace?.done();
      ctx.bodyAbandoned = true;
      parser.discard();
      reject(err instanceof MultipartError ? err.answer() : err);
    };
    // A body already complete in the handler tick has nothing left to pace.
    const pace = pacer && ctx.bodyUnread() ? pacer.track(ctx.res, fail) : undefined;
    ctx.onAbort(() => fail(new ClientGoneError('client disconnected during upload')));
    ctx.readBody((chunk, isLast) => {
      if (settled) return;
      try {
        received += chunk.byteLength;
        pace?.received(chunk.byteLength);
        if (received > limits.maxBodyBytes) throw new ServiceError('payload_too_large', `The body exceeds the ${limits.maxBodyBytes}-byte limit`);
        // A view, not a copy: uWS detaches the chunk when this callback returns, and the parser
        // copies what it keeps (each byte once, into its part) before then.
        if (chunk.byteLength > 0) parser.write(Buffer.from(chunk));
        if (isLast) {
          // uWS disarms its own timer on the last chunk; the pacer must not re-arm it
          pace?.done();
          const parts = parser.end();
          settled = true;
          resolve(parts);
        }
      } catch (err) {
        fail(err);
      }
    });
  });
}
