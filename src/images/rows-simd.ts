// The PNG decoder's memory and its SIMD row kernels: one WebAssembly instance per thread
// (unfilter-simd.wat), whose memory holds the inflate output and the unfiltered pixels.
//
// Why WebAssembly here: undoing the Sub filter is a running sum along the row, which JavaScript
// can only do a pixel at a time (the SWAR loop in png-decode.ts, already the fastest of the
// JavaScript forms measured); 128-bit vectors do five pixels a step and Up rows sixteen bytes:
// the load generator's all-Sub image unfilters in 0.09 ms of CPU with the copy out, against
// 0.24-0.31 ms for the JavaScript rows (bench/png-stages-cpu.mjs). Average and Paeth rows
// depend on the finished pixel to the left through a non-linear step (a halving, Paeth's
// choice), so they go a pixel a step, its three channels in one vector and no branch: they are
// what an encoder choosing a filter per row picks for a photograph (the project's own client:
// 310-317 of 320 rows Paeth or Average on the CLI's eye crops of the face-api sample photos),
// and JavaScript's Paeth, whose branches follow the data, cost 2.3-2.7 ms of CPU a frame on such
// a crop where the kernel takes 0.6-0.7, and 0.4-0.55 with two consecutive Paeth rows done
// together (paethPair; bench/results/png-paeth-s53.md).
//
// A runtime without WebAssembly SIMD, or one that cannot make the memory (its address-space
// reservation refused under a tight `ulimit -v`), gets null, and the decoder keeps its
// JavaScript rows.
import { CROP_SIZE, RGB8_BYTES } from '../contract/index.ts';
import { wasmBytes } from './unfilter-simd-wasm.ts';

/** a row's pixel bytes: the kernels' steps divide it (15 for Sub, 16 for Up, 3 for the others) */
const STRIDE = CROP_SIZE * 3;
/** 320 rows of 960 bytes, each after its filter byte */
export const RAW_LENGTH = CROP_SIZE * (STRIDE + 1);
/** zlib's room: the rows and 1 KiB more (png-decode.ts says why) */
export const INFLATE_ROOM = RAW_LENGTH + 1024;
/** where the pixels start in the memory: after the inflate room, 16-byte aligned */
const PIXELS_AT = Math.ceil(INFLATE_ROOM / 16) * 16;

/** How each filter's row is undone, given the offsets of its filtered bytes in the inflate
 * output (`src`) and of its pixels in the image (`dst`), the row above at `dst - 960`:
 * png-decode.ts has these in JavaScript, and this module as SIMD kernels. Sub serves any row;
 * the others serve rows after the first. */
export interface Rows {
  sub(src: number, dst: number): void;
  up(src: number, dst: number): void;
  average(src: number, dst: number): void;
  paeth(src: number, dst: number): void;
  /** this row and the next, both Paeth, in one pass; null where there is no such kernel */
  readonly paethPair: ((src: number, dst: number) => void) | null;
}

export interface SimdRows extends Rows {
  /** the inflate output's room, at offset 0 of the memory */
  readonly raw: Uint8Array;
  /** the unfiltered image, at PIXELS_AT: rows land here, then are copied to the caller */
  readonly pixels: Uint8Array;
}

interface Exports {
  memory: WebAssembly.Memory;
  sub(src: number, dst: number, end: number): void;
  up(src: number, dst: number, up: number, end: number): void;
  average(src: number, dst: number, up: number, end: number): void;
  paeth(src: number, dst: number, up: number, end: number): void;
  paethPair(src: number, dst: number, up: number, stride: number): void;
}

let rows: SimdRows | null | undefined;

/** This thread's kernels, or null where they cannot load. */
export function simdRows(): SimdRows | null {
  if (rows === undefined) rows = make();
  return rows;
}

function make(): SimdRows | null {
  let exports: Exports;
  try {
    // a few hundred bytes: compiled synchronously, once per thread, at the first PNG
    exports = new WebAssembly.Instance(new WebAssembly.Module(wasmBytes)).exports as unknown as Exports;
  } catch {
    return null;
  }
  const { memory, sub, up, average, paeth, paethPair } = exports;
  // every row the kernels touch, and the byte Sub's, Average's and Paeth's last steps write
  // past the last pixel row
  if (memory.buffer.byteLength < PIXELS_AT + RGB8_BYTES + 16 || STRIDE % 15 !== 0 || STRIDE % 16 !== 0) return null;
  const raw = new Uint8Array(memory.buffer, 0, INFLATE_ROOM);
  const pixels = new Uint8Array(memory.buffer, PIXELS_AT, RGB8_BYTES);
  return {
    raw,
    pixels,
    sub: (src, dst) => sub(src, PIXELS_AT + dst, src + STRIDE),
    up: (src, dst) => up(src, PIXELS_AT + dst, PIXELS_AT + dst - STRIDE, src + STRIDE),
    average: (src, dst) => average(src, PIXELS_AT + dst, PIXELS_AT + dst - STRIDE, src + STRIDE),
    paeth: (src, dst) => paeth(src, PIXELS_AT + dst, PIXELS_AT + dst - STRIDE, src + STRIDE),
    paethPair: (src, dst) => paethPair(src, PIXELS_AT + dst, PIXELS_AT + dst - STRIDE, STRIDE),
  };
}
