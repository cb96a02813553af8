// Last step before inference: decode every referenced image and attach the pixels to its frame.
// All bad images of the request are reported together, like every other 422.

import { ValidationFailure } from '../errors/index.ts';
import { tryDecodeImage } from '../images/index.ts';
import type { ParsedMetadata, PreparedCapture } from './types.ts';
import type { ValidationIssue } from '../contract/index.ts';

/** `bytesOf(part)` returns the uploaded bytes of a part that checkParts already accepted, or
 * undefined for a part it rejected (not decoded: its fault is already in `prior`). Frames
 * without an image get null. Throws ValidationFailure with the prior issues and one item
 * per bad image, so part and image faults of a request are reported together. */
export function prepareCaptures(
  parsed: ParsedMetadata,
  bytesOf: (part: string) => Uint8Array | undefined,
  prior: readonly ValidationIssue[] = [],
  /** told after each part is decoded, with the pixels when it decoded, so a caller that needs
   * no bytes afterwards can give them back while the next frames decode. A caller that passes
   * it needs no bytes afterwards: a part in shared memory (a frame-slab slot) then becomes its
   * frame's pixels, an rgb8 part as it is, a PNG part decoded over its own bytes (the slot is
   * its storage), and must stay until inference is over; other pixels have a buffer of their own. */
  decoded?: (part: string, bytes: Uint8Array, pixels: Uint8Array | undefined) => void,
): PreparedCapture[] {
  const prepared: PreparedCapture[] = parsed.captures.map((packet) => ({
    packet,
    pixels: packet.frames.map(() => null),
  }));
  const issues: ValidationIssue[] = [...prior];
  for (const ref of parsed.images) {
    const bytes = bytesOf(ref.part);
    if (bytes === undefined) continue;
    const result = tryDecodeImage(ref.encoding, bytes, ref.loc, decoded !== undefined);
    decoded?.(ref.part, bytes, result.pixels);
    if (result.issue) issues.push(result.issue);
    else prepared[ref.captureIndex].pixels[ref.frameIndex] = result.pixels;
  }
  if (issues.length > 0) throw new ValidationFailure(issues);
  return prepared;
}
