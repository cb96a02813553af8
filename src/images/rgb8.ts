// rgb8: the raw crop, exactly 307200 bytes of row-major HWC RGB (interface-spec.md "Image
// encodings"). Nothing to decode; only the length and ownership of the memory matter.

import { RGB8_BYTES } from '../contract/index.ts';
import { ImageError } from './errors.ts';
import { isSharedPixels } from './frame-slab.ts';

/** Checks the length and returns pixels an inference thread can be given without a copy:
 * `bytes` itself when it is a view of shared memory (a multipart part in a frame-slab slot,
 * which the inference threads read in place; the part's owner keeps the slot until the call
 * is over) or owns an ArrayBuffer of exactly 307200 bytes (transferable; ownership passes to
 * the caller). A slice of a larger buffer (a pooled Buffer) or a resizable one (a multipart
 * part without a slot) is copied once into a buffer of its own. */
export function rgb8ToPixels(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== RGB8_BYTES) {
    throw new ImageError('rgb8_wrong_size', `rgb8 image is ${bytes.length} bytes; 320x320 RGB is exactly ${RGB8_BYTES}`,
      { expected: RGB8_BYTES, actual: bytes.length });
  }
  // a part in a frame-slab slot: the inference thread reads it where it is
  if (isSharedPixels(bytes)) return bytes;
  // A part without a slot lives in a resizable ArrayBuffer (src/http/multipart/part.ts), and V8
  // in Node 20 reads typed arrays over those about 3x slower than over plain ones:
  // preprocessing reads every pixel, so such pixels are copied once into a plain buffer.
  // ArrayBuffer#slice is that copy as one memcpy (22 us for a crop here); TypedArray#set
  // reading a resizable buffer goes element by element (110 us).
  const buffer = bytes.buffer as ArrayBuffer & { resizable?: boolean };
  if (buffer.resizable !== true && bytes.byteOffset === 0 && buffer.byteLength === RGB8_BYTES && buffer instanceof ArrayBuffer) {
    return new Uint8Array(buffer);
  }
  if (buffer instanceof ArrayBuffer) return new Uint8Array(buffer.slice(bytes.byteOffset, bytes.byteOffset + RGB8_BYTES));
  const out = new Uint8Array(new ArrayBuffer(RGB8_BYTES));
  out.set(bytes);
  return out;
}
