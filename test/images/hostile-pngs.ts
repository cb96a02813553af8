// PNGs whose zlib stage is hostile, with the 422 each gets. Shared by png-decode.test.ts (the
// thread's reused native inflater) and inflate-fallback.test.ts (zlib.inflateSync, for a Node
// without the internals src/images/inflate.ts drives), so that both paths answer alike, and
// each bad image is followed by a good one on the same thread: one bad image must leave the
// inflater and the scratch fit for the next.
import * as zlib from 'node:zlib';
import type { Test } from 'tap';
import { decodePng, encodePng, ImageError } from '../../src/images/index.ts';

export function noise(seed: number, n = 320 * 320 * 3): Uint8Array {
  const out = new Uint8Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s * 1664525 + 1013904223) >>> 0;
    // smooth gradient plus noise: exercises every filter's prediction, not just raw bytes
    out[i] = ((i % 960) / 4 + (s >>> 28)) & 255;
  }
  return out;
}

interface Hostile {
  name: string;
  png: Uint8Array;
  type: string;
  message: RegExp;
}

function hostile(): Hostile[] {
  const rgb = noise(31);
  const png = (o: Parameters<typeof encodePng>[3]) => encodePng(rgb, 320, 320, o);
  const flipLast = (z: Uint8Array) => {
    const c = Buffer.from(z);
    c[c.length - 1] ^= 1;
    return c;
  };
  // the stream ends exactly where its IDAT chunk ends; the next (last) chunk is garbage
  let streamBytes = 0;
  const atBoundary = png({
    idatChunks: 2,
    transformZlib: (z) => {
      streamBytes = z.length;
      return Buffer.concat([z, Buffer.alloc(z.length, 7)]);
    },
  });
  return [
    { name: 'a wrong checksum', png: png({ transformZlib: flipLast }), type: 'png_invalid_zlib', message: /incorrect data check/ },
    { name: 'a wrong checksum, over chunks', png: png({ idatChunks: 5, transformZlib: flipLast }), type: 'png_invalid_zlib', message: /incorrect data check/ },
    { name: 'a stream cut short', png: png({ idatChunks: 3, transformZlib: (z) => z.subarray(0, z.length - 6) }), type: 'png_invalid_zlib', message: /unexpected end of file/ },
    { name: 'a gzip stream', png: png({ transformZlib: (z) => zlib.gzipSync(zlib.inflateSync(z)) }), type: 'png_invalid_zlib', message: /incorrect header check/ },
    { name: 'bytes after the stream in its chunk', png: png({ transformZlib: (z) => Buffer.concat([z, Buffer.from([1, 2, 3])]) }), type: 'png_invalid_zlib', message: /^3 bytes follow/ },
    { name: 'bytes after the stream over later chunks', png: png({ idatChunks: 7, transformZlib: (z) => Buffer.concat([z, Buffer.alloc(50_000, 1)]) }), type: 'png_invalid_zlib', message: /^50000 bytes follow/ },
    { name: 'a chunk of garbage after a stream that ends with its chunk', png: atBoundary, type: 'png_invalid_zlib', message: new RegExp(`^${streamBytes} bytes follow`) },
    { name: 'one byte short', png: png({ idatChunks: 2, transformRaw: (r) => r.subarray(0, r.length - 1) }), type: 'png_wrong_data_length', message: /is 307519 bytes/ },
    { name: 'one byte too long', png: png({ transformRaw: (r) => Buffer.concat([r, Buffer.from([0])]) }), type: 'png_wrong_data_length', message: /exceeds/ },
    { name: 'a deflate bomb', png: png({ idatChunks: 3, transformRaw: (r) => Buffer.concat([r, Buffer.alloc(10_000_000)]) }), type: 'png_wrong_data_length', message: /exceeds/ },
    { name: 'a bad filter byte', png: png({ transformRaw: (r) => { const c = Buffer.from(r); c[961 * 7] = 5; return c; } }), type: 'png_invalid_filter', message: /Row 7/ },
  ];
}

/** Each hostile PNG gets its 422 (type and message), and a good PNG decoded right after it is exact. */
export function checkHostile(t: Test): void {
  const good = noise(32);
  const goodPng = encodePng(good, 320, 320, { idatChunks: 4, filter: 'cycle' });
  for (const c of hostile()) {
    try {
      decodePng(c.png);
      t.fail(`${c.name}: expected ${c.type}`);
    } catch (err) {
      t.ok(err instanceof ImageError, `${c.name}: an ImageError`);
      t.equal((err as ImageError).type, c.type, c.name);
      t.match((err as ImageError).message, c.message, c.name);
    }
    t.ok(Buffer.from(decodePng(goodPng)).equals(Buffer.from(good)), `a good image right after ${c.name}`);
  }
}
