// Strict PNG decoder for exactly what interface-spec.md accepts: 320x320, 8-bit truecolour
// (colour type 2), no alpha, no palette, not interlaced. Anything else is refused with a
// precise ImageError rather than converted, because a silently converted image is not the
// crop the client computed. Adam7 interlacing is valid PNG but refused as unsupported: a
// client encoding a crop has no reason to interlace it.
//
// Speed: one inflate of the IDAT chunks as they lie, by the thread's reused native inflater
// (inflate.ts), into a scratch buffer reused from frame to frame; then one pass that undoes
// the filters by the SIMD kernels (rows-simd.ts) into the thread's pixel buffer, and one copy
// into the result: the caller's memory when it gives some (the part's own frame-slab slot,
// written over once the PNG bytes are no longer needed), else a buffer of exactly the pixels.
// Where WebAssembly SIMD is missing, the JavaScript rows below write straight into the result.
// No per-frame allocation on the way when the caller gives the memory.

import { CROP_SIZE, RGB8_BYTES } from '../contract/index.ts';
import { crc32 } from './crc32.ts';
import { ImageError } from './errors.ts';
import { inflateInto, ZlibError } from './inflate.ts';
import { INFLATE_ROOM, RAW_LENGTH, simdRows, type Rows } from './rows-simd.ts';

const SIGNATURE = [137, 80, 78, 71, 13, 10, 26, 10];
const BPP = 3;
const STRIDE = CROP_SIZE * BPP; // 960 bytes of pixels per row
// RAW_LENGTH: 320 rows, each preceded by its filter-type byte. INFLATE_ROOM, zlib's output
// room: what the rows need and 1 KiB more. zlib never writes past it, so a deflate bomb stops
// there; a stream up to 1 KiB too long is still read to its end (its own faults, a bad
// checksum say, are reported first, as they always were) and one that fills the room is too
// long, whatever follows. (Both live in rows-simd.ts, which lays its memory out by them.)

/** This thread's inflate output, reused by every decode (the pixels never live in it): in the
 * SIMD kernels' memory when they load. */
let scratch: Uint8Array | undefined;

const COLOR_TYPES: Record<number, string> = {
  0: 'greyscale',
  2: 'truecolour RGB',
  3: 'indexed (palette)',
  4: 'greyscale with alpha',
  6: 'truecolour with alpha (RGBA)',
};

interface Header {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
  compression: number;
  filter: number;
  interlace: number;
}

/** PNG bytes -> 307200 bytes of RGB (HWC). With `into` (at least 307200 bytes), the pixels are
 * written there and the result is its first 307200 bytes; `into` may be the memory `bytes`
 * lie in (every byte of the PNG is read before the first pixel is written). Without it, the
 * result is a view of an ArrayBuffer of exactly the pixels that belongs to it alone, so the
 * caller can transfer it to a worker. Throws ImageError. */
export function decodePng(bytes: Uint8Array, into?: Uint8Array): Uint8Array {
  checkSignature(bytes);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const idat: Uint8Array[] = [];
  let idatState: 'before' | 'inside' | 'after' = 'before';
  let header: Header | undefined;
  let sawPalette = false;
  let sawEnd = false;
  let pos = 8;

  while (pos < bytes.length) {
    if (pos + 12 > bytes.length) {
      throw new ImageError('png_truncated', `PNG ends inside a chunk header at byte ${pos}`, { offset: pos });
    }
    const length = view.getUint32(pos);
    const dataStart = pos + 8;
    const end = dataStart + length;
    const type = chunkType(bytes, pos + 4);
    if (length > 0x7fffffff) {
      throw new ImageError('png_invalid_chunk', `Chunk ${type} at byte ${pos} declares length ${length}, above the PNG maximum 2^31-1`, { chunk: type, offset: pos });
    }
    if (end + 4 > bytes.length) {
      throw new ImageError('png_truncated', `Chunk ${type} at byte ${pos} declares ${length} data bytes but the file ends first`, { chunk: type, offset: pos, length });
    }
    const stored = view.getUint32(end);
    const actual = crc32(bytes.subarray(pos + 4, end));
    if (stored !== actual) {
      throw new ImageError('png_invalid_crc', `CRC of chunk ${type} at byte ${pos} is wrong (stored ${hex32(stored)}, computed ${hex32(actual)})`,
        { chunk: type, offset: pos });
    }

    if (header === undefined) {
      if (type !== 'IHDR') {
        throw new ImageError('png_missing_ihdr', `The first chunk must be IHDR, not ${type}`, { chunk: type });
      }
      header = readHeader(view, dataStart, length);
      checkHeader(header);
    } else if (type === 'IDAT') {
      if (idatState === 'after') {
        throw new ImageError('png_idat_not_contiguous', `IDAT chunk at byte ${pos} follows another chunk after the image data; IDAT chunks must be consecutive`, { offset: pos });
      }
      idatState = 'inside';
      idat.push(bytes.subarray(dataStart, end));
    } else {
      if (idatState === 'inside') idatState = 'after';
      switch (type) {
        case 'IEND':
          if (length !== 0) throw new ImageError('png_invalid_chunk', `IEND must be empty, not ${length} bytes`, { chunk: type });
          sawEnd = true;
          break;
        case 'IHDR':
          throw new ImageError('png_chunk_order', `Second IHDR chunk at byte ${pos}`, { chunk: type, offset: pos });
        case 'PLTE':
          // Allowed for colour type 2 as a suggested quantisation palette; the pixels stay RGB.
          if (sawPalette || idatState !== 'before') {
            throw new ImageError('png_chunk_order', `PLTE at byte ${pos} must come once, before the image data`, { chunk: type, offset: pos });
          }
          sawPalette = true;
          break;
        case 'tRNS':
          // For colour type 2, tRNS makes one RGB value transparent: alpha by another name.
          throw new ImageError('png_unsupported_transparency', 'tRNS (transparency) is not accepted; the crop is opaque RGB without alpha', { chunk: type });
        default:
          if ((bytes[pos + 4] & 0x20) === 0) {
            throw new ImageError('png_unknown_critical_chunk', `Unknown critical chunk ${type}; a decoder must not ignore it`, { chunk: type });
          }
      }
    }
    pos = end + 4;
    if (sawEnd) break;
  }

  if (header === undefined) throw new ImageError('png_missing_ihdr', 'The PNG has no IHDR chunk');
  if (!sawEnd) throw new ImageError('png_missing_iend', 'The PNG has no IEND chunk; the file is truncated');
  if (pos !== bytes.length) {
    throw new ImageError('png_trailing_data', `${bytes.length - pos} bytes follow the IEND chunk`, { bytes: bytes.length - pos });
  }
  if (idat.length === 0) throw new ImageError('png_missing_idat', 'The PNG has no IDAT chunk');

  const raw = inflateRows(idat);
  if (into !== undefined && into.length < RGB8_BYTES) throw new RangeError(`decodePng needs room for ${RGB8_BYTES} bytes of pixels`);
  const out = into === undefined ? new Uint8Array(new ArrayBuffer(RGB8_BYTES)) : into.subarray(0, RGB8_BYTES);
  return unfilterInto(raw, out);
}

/** The filter stage as decodePng runs it: `raw` from inflate() (the thread's scratch, in the
 * SIMD kernels' memory when they load) -> `out`, the rows by the kernels and the pixels
 * copied into `out`; any other `raw`, or no SIMD, goes through unfilter. Exported for
 * bench/png-stages-cpu.mjs. */
export function unfilterInto(raw: Uint8Array, out: Uint8Array): Uint8Array {
  const simd = simdRows();
  if (simd === null || raw.buffer !== simd.raw.buffer || raw.byteOffset !== 0) return unfilter(raw, out);
  unfilterRows(raw, simd.pixels, simd);
  out.set(simd.pixels);
  return out;
}

function checkSignature(bytes: Uint8Array): void {
  for (let i = 0; i < SIGNATURE.length; i++) {
    if (bytes[i] !== SIGNATURE[i]) {
      const jpeg = bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
      throw new ImageError('png_invalid_signature', jpeg
        ? 'The bytes are JPEG; only lossless PNG (or rgb8) is accepted'
        : 'The bytes do not start with the PNG signature', jpeg ? { detected: 'jpeg' } : undefined);
    }
  }
}

function chunkType(bytes: Uint8Array, at: number): string {
  let s = '';
  for (let i = at; i < at + 4; i++) {
    const c = bytes[i];
    if (!((c >= 65 && c <= 90) || (c >= 97 && c <= 122))) {
      throw new ImageError('png_invalid_chunk', `Chunk at byte ${at - 4} has an invalid type (bytes must be ASCII letters)`, { offset: at - 4 });
    }
    s += String.fromCharCode(c);
  }
  return s;
}

function readHeader(view: DataView, at: number, length: number): Header {
  if (length !== 13) throw new ImageError('png_invalid_ihdr', `IHDR must be 13 bytes, not ${length}`);
  return {
    width: view.getUint32(at),
    height: view.getUint32(at + 4),
    bitDepth: view.getUint8(at + 8),
    colorType: view.getUint8(at + 9),
    compression: view.getUint8(at + 10),
    filter: view.getUint8(at + 11),
    interlace: view.getUint8(at + 12),
  };
}

// Colour type first: "it has alpha" is the message a client needs, whatever else is off.
function checkHeader(h: Header): void {
  if (h.colorType !== 2) {
    const name = COLOR_TYPES[h.colorType];
    throw new ImageError('png_unsupported_color_type',
      `PNG colour type ${h.colorType}${name ? ` (${name})` : ''} is not accepted; use colour type 2 (truecolour RGB, no alpha, no palette)`,
      { color_type: h.colorType });
  }
  if (h.bitDepth !== 8) {
    throw new ImageError('png_unsupported_bit_depth', `PNG bit depth ${h.bitDepth} is not accepted; use 8 bits per channel`, { bit_depth: h.bitDepth });
  }
  if (h.width !== CROP_SIZE || h.height !== CROP_SIZE) {
    throw new ImageError('png_wrong_size', `PNG is ${h.width}x${h.height}; the crop must be exactly ${CROP_SIZE}x${CROP_SIZE}`,
      { width: h.width, height: h.height, expected_width: CROP_SIZE, expected_height: CROP_SIZE });
  }
  if (h.compression !== 0) {
    throw new ImageError('png_invalid_ihdr', `Unknown PNG compression method ${h.compression}`, { compression: h.compression });
  }
  if (h.filter !== 0) {
    throw new ImageError('png_invalid_ihdr', `Unknown PNG filter method ${h.filter}`, { filter_method: h.filter });
  }
  if (h.interlace === 1) {
    throw new ImageError('png_unsupported_interlace', 'Adam7-interlaced PNG is not supported; encode without interlacing', { interlace: 1 });
  }
  if (h.interlace !== 0) {
    throw new ImageError('png_invalid_ihdr', `Unknown PNG interlace method ${h.interlace}`, { interlace: h.interlace });
  }
}

/** The zlib stage: the IDAT chunks' stream -> the 320 filtered rows, in this thread's scratch
 * (valid until the next decode on this thread). Exported for bench/frame.mjs, which times it
 * apart from the unfilter. */
export function inflate(data: Uint8Array): Uint8Array {
  return inflateRows([data]);
}

function inflateRows(idat: readonly Uint8Array[]): Uint8Array {
  scratch ??= simdRows()?.raw ?? new Uint8Array(INFLATE_ROOM);
  let result: { written: number; trailing: number };
  try {
    result = inflateInto(idat, scratch);
  } catch (err) {
    if (!(err instanceof ZlibError)) throw err;
    throw new ImageError('png_invalid_zlib', `The IDAT data is not a valid zlib stream: ${err.message}`);
  }
  if (result.written > RAW_LENGTH) {
    throw new ImageError('png_wrong_data_length', `Decompressed image data exceeds the ${RAW_LENGTH} bytes of 320 filtered rows`,
      { expected: RAW_LENGTH });
  }
  if (result.trailing > 0) {
    throw new ImageError('png_invalid_zlib', `${result.trailing} bytes follow the end of the zlib stream in IDAT`,
      { trailing: result.trailing });
  }
  if (result.written !== RAW_LENGTH) {
    throw new ImageError('png_wrong_data_length', `Decompressed image data is ${result.written} bytes; 320 filtered rows need ${RAW_LENGTH}`,
      { expected: RAW_LENGTH, actual: result.written });
  }
  return scratch.subarray(0, RAW_LENGTH);
}

/** The filter stage alone, in JavaScript: 320 filtered rows -> RGB (exported for
 * bench/frame.mjs, and the rows of a runtime without WebAssembly SIMD). `out` may
 * be `raw` itself: each row's pixels land before its own filtered bytes (row y moves back by
 * y + 1 bytes), every byte is read before it is overwritten, and the row above is read from
 * its finished place (decodePng writes elsewhere: its input is the thread's inflate scratch).
 * Hot: a sixth to a fifth of a PNG's decode. Each loop carries the left pixel (and, for
 * Paeth, the upper-left's) in locals rather than reading back what it just wrote, which halved
 * the Sub and Paeth rows (0.95 -> 0.4 ms on the load generator's all-Sub image); Sub, Up and
 * Average rows then carry it as one word (subRow), another fifth to a third off
 * (bench/results/png-cpu-s49.md). */
export function unfilter(raw: Uint8Array, out: Uint8Array = new Uint8Array(new ArrayBuffer(RGB8_BYTES))): Uint8Array {
  return unfilterRows(raw, out, jsRows(raw, out));
}

/** The JavaScript rows over `raw` and `out`. Sub, Up and Average rows move a pixel as one
 * 32-bit word (addLanes), through these views of exactly `raw` and `out`: each row's last pixel
 * goes byte by byte, so no word reaches past its row's end, nor past either array. */
function jsRows(raw: Uint8Array, out: Uint8Array): Rows {
  const rv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const ov = new DataView(out.buffer, out.byteOffset, out.byteLength);
  return {
    sub: (src, dst) => subRow(raw, out, rv, ov, src, dst, STRIDE),
    up: (src, dst) => upRow(raw, out, rv, ov, src, dst, dst - STRIDE, STRIDE),
    average: (src, dst) => averageRow(raw, out, rv, ov, src, dst, dst - STRIDE, STRIDE),
    paeth: (src, dst) => paethRow(raw, out, src, dst, dst - STRIDE, STRIDE),
    paethPair: null,
  };
}

/** The filter stage by `rows`: the SIMD kernels (`raw` and `out` are then their memory's `raw`
 * and `pixels`, whose offsets they take) or the JavaScript rows over `raw` and `out`. A first
 * row has no row above: Up is a copy, Average halves the left pixel alone (in JavaScript: one
 * row in 320 at most), Paeth is Sub. */
function unfilterRows(raw: Uint8Array, out: Uint8Array, rows: Rows): Uint8Array {
  const stride = STRIDE;
  for (let y = 0; y < CROP_SIZE; y++) {
    const filter = raw[y * (stride + 1)];
    const src = y * (stride + 1) + 1;
    const dst = y * stride;
    switch (filter) {
      case 0:
        copyRow(raw, out, src, dst, stride);
        break;
      case 1:
        rows.sub(src, dst);
        break;
      case 2:
        if (y === 0) copyRow(raw, out, src, dst, stride);
        else rows.up(src, dst);
        break;
      case 3:
        if (y === 0) averageFirstRow(raw, out, src, dst, stride);
        else rows.average(src, dst);
        break;
      case 4:
        if (y === 0) rows.sub(src, dst);
        else if (rows.paethPair !== null && y + 1 < CROP_SIZE && raw[(y + 1) * (stride + 1)] === 4) {
          rows.paethPair(src, dst); // and row y + 1
          y++;
        } else rows.paeth(src, dst);
        break;
      default:
        throw new ImageError('png_invalid_filter', `Row ${y} uses filter type ${filter}; PNG defines 0 to 4`, { row: y, filter });
    }
  }
  return out;
}

function copyRow(raw: Uint8Array, out: Uint8Array, src: number, dst: number, stride: number): void {
  if (out === raw) out.copyWithin(dst, src, src + stride);
  else out.set(raw.subarray(src, src + stride), dst);
}

/** Two pixels' three bytes added lane by lane, without carries between them: the low 7 bits of
 * each byte added, the top bits put back by xor. One add per pixel instead of three, which took
 * a quarter to a third off the unfilter of the load generator's all-Sub image (CPU time,
 * bench/results/png-cpu-s49.md). A fourth byte in either is dropped: the result's is 0. */
function addLanes(a: number, b: number): number {
  return ((a & 0x7f7f7f) + (b & 0x7f7f7f)) ^ ((a ^ b) & 0x808080);
}

/** A pixel's three bytes as one number (a row's last pixel, read byte by byte). */
function pixelAt(bytes: Uint8Array, at: number): number {
  return bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16);
}

/** Writes a pixel's three bytes (a row's last pixel, byte by byte). */
function putPixel(bytes: Uint8Array, at: number, p: number): void {
  bytes[at] = p;
  bytes[at + 1] = p >> 8;
  bytes[at + 2] = p >> 16;
}

// The word rows below: for every pixel but the row's last, the word read at `src + i` takes the
// next pixel's first byte along (dropped by addLanes), and the word written at `dst + i` puts a
// 0 on the next pixel's first byte, written later in the row. With out === raw that byte is one
// `raw` has already read: a row lands y + 1 bytes before its filtered bytes.

/** Sub: each byte plus the one a pixel to its left. */
function subRow(raw: Uint8Array, out: Uint8Array, rv: DataView, ov: DataView, src: number, dst: number, stride: number): void {
  const last = stride - 3;
  let p = 0;
  for (let i = 0; i < last; i += 3) {
    p = addLanes(rv.getUint32(src + i, true), p);
    ov.setUint32(dst + i, p, true);
  }
  putPixel(out, dst + last, addLanes(pixelAt(raw, src + last), p));
}

function averageFirstRow(raw: Uint8Array, out: Uint8Array, src: number, dst: number, stride: number): void {
  let r = 0;
  let g = 0;
  let b = 0;
  for (let i = 0; i < stride; i += 3) {
    r = (raw[src + i] + (r >> 1)) & 255;
    g = (raw[src + i + 1] + (g >> 1)) & 255;
    b = (raw[src + i + 2] + (b >> 1)) & 255;
    out[dst + i] = r;
    out[dst + i + 1] = g;
    out[dst + i + 2] = b;
  }
}

/** Up: each byte plus the one above it (the row above read a word at a time too, inside its
 * own row). */
function upRow(raw: Uint8Array, out: Uint8Array, rv: DataView, ov: DataView, src: number, dst: number, up: number, stride: number): void {
  const last = stride - 3;
  for (let i = 0; i < last; i += 3) ov.setUint32(dst + i, addLanes(rv.getUint32(src + i, true), ov.getUint32(up + i, true)), true);
  putPixel(out, dst + last, addLanes(pixelAt(raw, src + last), pixelAt(out, up + last)));
}

/** Average: each byte plus the floor of the mean of the one to its left and the one above:
 * floor((a + b) / 2) is (a & b) + ((a ^ b) >> 1) in each lane (the shifted half masked so no
 * lane's low bit falls into the lane below, the fourth byte masked off the word above). */
function averageRow(raw: Uint8Array, out: Uint8Array, rv: DataView, ov: DataView, src: number, dst: number, up: number, stride: number): void {
  const last = stride - 3;
  let a = 0;
  for (let i = 0; i < last; i += 3) {
    a = addLanes(rv.getUint32(src + i, true), mean(a, ov.getUint32(up + i, true) & 0xffffff));
    ov.setUint32(dst + i, a, true);
  }
  putPixel(out, dst + last, addLanes(pixelAt(raw, src + last), mean(a, pixelAt(out, up + last))));
}

/** floor((a + b) / 2) in each of three byte lanes. */
function mean(a: number, b: number): number {
  return (a & b) + (((a ^ b) >>> 1) & 0x7f7f7f);
}

function paeth(a: number, b: number, c: number): number {
  const pa = Math.abs(b - c);
  const pb = Math.abs(a - c);
  const pc = Math.abs(a + b - 2 * c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

function paethRow(raw: Uint8Array, out: Uint8Array, src: number, dst: number, up: number, stride: number): void {
  // left (a) and upper-left (c) of each channel; both are 0 left of the first pixel
  let ar = 0;
  let ag = 0;
  let ab = 0;
  let cr = 0;
  let cg = 0;
  let cb = 0;
  for (let i = 0; i < stride; i += 3) {
    const br = out[up + i];
    const bg = out[up + i + 1];
    const bb = out[up + i + 2];
    ar = (raw[src + i] + paeth(ar, br, cr)) & 255;
    ag = (raw[src + i + 1] + paeth(ag, bg, cg)) & 255;
    ab = (raw[src + i + 2] + paeth(ab, bb, cb)) & 255;
    out[dst + i] = ar;
    out[dst + i + 1] = ag;
    out[dst + i + 2] = ab;
    cr = br;
    cg = bg;
    cb = bb;
  }
}

function hex32(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}
