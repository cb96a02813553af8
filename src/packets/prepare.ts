// Last step before inference: decode every referenced image and attach the pixels to its frame.
// All bad images of the request are reported together, like every other 422.

import { ValidationFailure } from '../errors/codes.ts';
import { tryDecodeImage } from '../images/decode.ts';
import type { ParsedMetadata, PreparedCapture, ValidationIssue } from './types.ts';

/** `bytesOf(part)` returns the uploaded bytes of a part that checkParts already accepted.
 * Frames without an image get null. Throws ValidationFailure with one item per bad image. */
export function prepareCaptures(parsed: ParsedMetadata, bytesOf: (part: string) => Uint8Array): PreparedCapture[] {
  const prepared: PreparedCapture[] = parsed.captures.map((packet) => ({
    packet,
    pixels: packet.frames.map(() => null),
  }));
  const issues: ValidationIssue[] = [];
  for (const ref of parsed.images) {
    const result = tryDecodeImage(ref.encoding, bytesOf(ref.part), ref.loc);
    if (result.issue) issues.push(result.issue);
    else prepared[ref.captureIndex].pixels[ref.frameIndex] = result.pixels;
  }
  if (issues.length > 0) throw new ValidationFailure(issues);
  return prepared;
}
