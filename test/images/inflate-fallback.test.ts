// The zlib stage's fallback (src/images/inflate.ts): on a Node whose zlib.Inflate lacks the
// internals the reused inflater drives (its handle's writeSync and the two-number write state),
// every image is inflated by zlib.inflateSync, with the same pixels and the same 422s as the
// reused path (test/images/png-decode.test.ts, on this Node). This process hides the write
// state before the decoder first makes its inflater, so everything here takes the fallback.
import t from 'tap';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import type * as Zlib from 'node:zlib';

const zlibCjs = createRequire(import.meta.url)('node:zlib') as typeof Zlib;
const createInflate = zlibCjs.createInflate;
// (read-only, but configurable)
Object.defineProperty(zlibCjs, 'createInflate', {
  value: (options?: Zlib.ZlibOptions) => {
    const stream = createInflate(options) as Zlib.Inflate & { _writeState?: unknown };
    stream._writeState = undefined;
    return stream;
  },
});
syncBuiltinESMExports();

const { encodePng, FrameSlab, isSharedPixels, tryDecodeImage, decodePng } = await import('../../src/images/index.ts');
const { reusesInflater } = await import('../../src/images/inflate.ts');
const { checkHostile, noise } = await import('./hostile-pngs.ts');

t.test('a Node without the internals: zlib.inflateSync, same pixels', async (t) => {
  t.equal(reusesInflater(), false, 'the fallback is taken');
  for (const idatChunks of [1, 40]) {
    const rgb = noise(40 + idatChunks);
    const out = decodePng(encodePng(rgb, 320, 320, { idatChunks, filter: 'cycle' }));
    t.ok(Buffer.from(out).equals(Buffer.from(rgb)), `${idatChunks} IDAT chunk(s): exact pixels`);
    t.equal(out.buffer.byteLength, 307200, 'a buffer of exactly the pixels');
  }
});

t.test('a Node without the internals: every hostile zlib stage gets the same 422, and the next image decodes', async (t) => {
  checkHostile(t);
});

t.test('a Node without the internals: a consumed PNG in a slot is decoded over its bytes', async (t) => {
  const slab = new FrameSlab(1);
  const rgb = noise(43);
  const png = encodePng(rgb, 320, 320, { idatChunks: 3 });
  const slot = slab.take()!;
  slot.bytes.set(png);
  const px = tryDecodeImage('png', slot.bytes.subarray(0, png.length), ['image'], true).pixels!;
  t.ok(Buffer.from(px).equals(Buffer.from(rgb)), 'exact pixels');
  t.ok(isSharedPixels(px) && px.buffer === slot.bytes.buffer && px.byteOffset === slot.bytes.byteOffset, 'in the part\'s slot');
});
