export { ImageError } from './errors.ts';
export { decodePng } from './png-decode.ts';
export { encodePng, type PngEncodeOptions, type PngChunk, type PngFilter } from './png-encode.ts';
export { rgb8ToPixels } from './rgb8.ts';
export { FrameSlab, frameSlab, isSharedPixels, slotOf, slotWritten, type SlabSlot } from './frame-slab.ts';
export { decodeImage, tryDecodeImage, imageIssue, type DecodeResult } from './decode.ts';
export { crc32 } from './crc32.ts';
