// From uploaded bytes to pixels, with failures as 422 items that point at the frame's image.

import { ValidationFailure } from '../errors/index.ts';
import type { ImageEncoding, ValidationIssue } from '../contract/index.ts';
import { RGB8_BYTES } from '../contract/index.ts';
import { ImageError } from './errors.ts';
import { slotOf, slotWritten } from './frame-slab.ts';
import { decodePng } from './png-decode.ts';
import { rgb8ToPixels } from './rgb8.ts';

export type DecodeResult = { pixels: Uint8Array; issue?: undefined } | { pixels?: undefined; issue: ValidationIssue };

/** Decodes one image; a bad image becomes an issue instead of an exception, so a caller can
 * decode every frame and report all bad images in one 422. `loc` is the frame's `image`.
 * `consume`: the caller needs the bytes no more, whatever the outcome; a PNG whose bytes lie at
 * the start of a frame-slab slot is then decoded over them, into that slot (the pixels are then
 * the part's storage, as an rgb8 part's are, and shared with the inference threads without a
 * copy), where it would otherwise get a buffer of its own. */
export function tryDecodeImage(encoding: ImageEncoding, bytes: Uint8Array, loc: readonly (string | number)[], consume = false): DecodeResult {
  try {
    if (encoding !== 'png') return { pixels: rgb8ToPixels(bytes) };
    const slot = consume ? slotOf(bytes) : null;
    const into = slot !== null && slot.length >= RGB8_BYTES ? slot : undefined;
    try {
      return { pixels: decodePng(bytes, into) };
    } finally {
      // the pixels' bytes, or, for a PNG that failed, what it may have written before it failed
      if (into !== undefined) slotWritten(into, RGB8_BYTES);
    }
  } catch (err) {
    if (!(err instanceof ImageError)) throw err;
    return { issue: imageIssue(err, loc) };
  }
}

/** Like tryDecodeImage, but throws ValidationFailure with the single issue. */
export function decodeImage(encoding: ImageEncoding, bytes: Uint8Array, loc: readonly (string | number)[]): Uint8Array {
  const result = tryDecodeImage(encoding, bytes, loc);
  if (result.issue) throw new ValidationFailure([result.issue]);
  return result.pixels;
}

export function imageIssue(err: ImageError, loc: readonly (string | number)[]): ValidationIssue {
  const issue: ValidationIssue = { loc: [...loc], msg: err.message, type: err.type };
  if (err.ctx) issue.ctx = err.ctx;
  return issue;
}
