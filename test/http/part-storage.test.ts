// Where a multipart part's bytes live: a frame-slab slot while one is free and the part fits,
// else (or once it outgrows the slot) a buffer of its own; either way the same bytes and hash,
// and the storage goes back exactly once.

import { createHash } from 'node:crypto';
import t from 'tap';
import { PartAccumulator } from '../../src/http/multipart/part.ts';
import { MultipartParser } from '../../src/http/multipart/index.ts';
import { RGB8_BYTES } from '../../src/contract/index.ts';
import { encodePng, FrameSlab, frameSlab, slotWritten, tryDecodeImage } from '../../src/images/index.ts';

const headers = { name: 'image_0', filename: 'a.bin', contentType: 'application/octet-stream' };
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

function fill(acc: PartAccumulator, data: Uint8Array, step = 7919): void {
  for (let at = 0; at < data.length; at += step) acc.append(data.subarray(at, Math.min(data.length, at + step)));
}

t.test('the slab lends its slots LIFO, none twice, and gives each back once', async (t) => {
  const slab = new FrameSlab(3, 1024);
  const a = slab.take()!;
  const b = slab.take()!;
  const c = slab.take()!;
  t.equal(slab.take(), null, 'all three on loan: none left');
  t.equal(slab.taken, 3);
  t.same(new Set([a.bytes.byteOffset, b.bytes.byteOffset, c.bytes.byteOffset]).size, 3, 'three distinct slots');
  t.ok(a.bytes.buffer instanceof SharedArrayBuffer, 'slots are shared memory');
  b.give();
  b.give();
  t.equal(slab.taken, 2, 'a second give() of the same loan is a no-op');
  const again = slab.take()!;
  t.equal(again.bytes.byteOffset, b.bytes.byteOffset, 'the slot given back last is lent first (its pages are warm)');
  t.equal(slab.take(), null, 'the double give() did not free a slot twice');
  t.throws(() => new FrameSlab(-1), RangeError);
});

t.test('a part that fits lives in its slot: same bytes and hash, released once', async (t) => {
  const slab = new FrameSlab(2, 4096);
  const data = bytes(3000);
  const acc = new PartAccumulator(headers, 1 << 20, slab);
  t.equal(slab.taken, 1, 'the part took a slot');
  fill(acc, data, 100);
  const part = acc.finish();
  t.equal(part.size, 3000);
  t.equal(part.sha256, sha(data));
  t.ok(part.data().equals(data), 'the bytes');
  t.ok(part.data().buffer instanceof SharedArrayBuffer, 'read in place from the slot');
  part.release!();
  t.equal(part.data().length, 0, 'released: no bytes');
  t.equal(slab.taken, 0, 'the slot is back');
  part.release!();
  t.equal(slab.taken, 0, 'release is idempotent');
});

t.test('a part that outgrows its slot moves to a buffer of its own once, bytes and hash intact', async (t) => {
  const slab = new FrameSlab(1, 4096);
  const data = bytes(10_000, 5);
  const acc = new PartAccumulator(headers, 1 << 20, slab);
  fill(acc, data, 1500);
  t.equal(slab.taken, 0, 'the slot went back when the part outgrew it');
  const part = acc.finish();
  t.equal(part.sha256, sha(data));
  t.ok(part.data().equals(data));
  t.notOk(part.data().buffer instanceof SharedArrayBuffer, 'its own buffer');
  part.release!();
  t.equal(part.data().length, 0);
});

t.test('without a free slot a part uses a buffer of its own; limits hold either way', async (t) => {
  const slab = new FrameSlab(0);
  const acc = new PartAccumulator(headers, 5000, slab);
  fill(acc, bytes(4000), 333);
  t.throws(() => acc.append(bytes(1001)), { name: 'MultipartError', message: /exceeds the limit/ }, 'the part limit is enforced');
  const inSlot = new PartAccumulator(headers, 5000, new FrameSlab(1, 8192));
  fill(inSlot, bytes(5000), 1000);
  t.throws(() => inSlot.append(bytes(1)), { name: 'MultipartError', message: /exceeds the limit/ }, 'a slot larger than the limit does not lift it');
});

t.test('a parser that is discarded gives back its finished parts and the unfinished one', async (t) => {
  const slab = new FrameSlab(4, 4096);
  const done = new PartAccumulator(headers, 1 << 20, slab);
  fill(done, bytes(100));
  const finished = done.finish();
  const open = new PartAccumulator(headers, 1 << 20, slab);
  fill(open, bytes(100));
  t.equal(slab.taken, 2);
  open.discard();
  finished.release!();
  t.equal(slab.taken, 0);

  const boundary = 'XyZ';
  const before = frameSlab().taken;
  const p = new MultipartParser(boundary, { maxPartBytes: 1 << 20, maxParts: 10, maxHeaderBytes: 1024 });
  p.write(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="a"\r\n\r\nhello\r\n--${boundary}\r\nContent-Disposition: form-data; name="b"\r\n\r\nhal`));
  t.equal(frameSlab().taken, before + 2, 'a finished and an unfinished part, in this thread\'s slab');
  p.discard();
  t.equal(frameSlab().taken, before, 'discard() gave both slots back');
  t.throws(() => p.write(Buffer.from('f')), 'a discarded parser is dead');
});

t.test('a slab counts what is resident of it: the pages written, each once, up to its size', async (t) => {
  const slab = new FrameSlab(3, 16 * 1024);
  t.equal(slab.residentBytes, 0, 'mapped but never written: nothing resident');
  const part = new PartAccumulator(headers, 1 << 20, slab);
  part.append(bytes(1));
  t.equal(slab.residentBytes, 4096, 'one byte written: its page');
  fill(part, bytes(5000), 1000);
  t.equal(slab.residentBytes, 8192, 'the part grown to 5,001 bytes: two pages');
  part.finish().release!();

  const again = new PartAccumulator(headers, 1 << 20, slab);
  fill(again, bytes(3000));
  t.equal(slab.residentBytes, 8192, 'the same slot lent again (LIFO) and written less: nothing new');
  const second = new PartAccumulator(headers, 1 << 20, slab);
  fill(second, bytes(100));
  t.equal(slab.residentBytes, 12288, 'a second slot, written for the first time: one page more');
  const outgrown = new PartAccumulator(headers, 1 << 20, slab);
  fill(outgrown, bytes(20 * 1024));
  t.equal(slab.residentBytes, 12288 + 16 * 1024, 'a part that outgrew the third slot filled it first: the whole slot, no more');
  outgrown.discard();
  again.discard();
  second.discard();
  t.equal(slab.residentBytes, 12288 + 16 * 1024, 'given back, the slots stay resident: the high-water mark');
  slab.wrote(3, 4096);
  slab.wrote(-1, 4096);
  t.equal(slab.residentBytes, 12288 + 16 * 1024, 'a slot index the slab does not have counts nothing');

  // a PNG decoded over its own part (decode.ts) writes the pixels past the part's bytes
  const pngSlab = new FrameSlab(1, RGB8_BYTES + 4096);
  const png = encodePng(new Uint8Array(RGB8_BYTES).fill(9), 320, 320);
  const pngPart = new PartAccumulator(headers, 1 << 20, pngSlab);
  fill(pngPart, png);
  const before = pngSlab.residentBytes;
  t.ok(before < RGB8_BYTES, 'the compressed part alone is smaller than its pixels');
  const decoded = tryDecodeImage('png', pngPart.finish().data(), ['image_0'], true);
  t.equal(decoded.pixels?.length, RGB8_BYTES);
  t.equal(pngSlab.residentBytes, Math.ceil(RGB8_BYTES / 4096) * 4096, 'the pixels decoded into the slot count');
  // a view that does not start at a slot, or is not a slab's, changes nothing
  slotWritten(new Uint8Array(new SharedArrayBuffer(8192)), 8192);
  t.equal(pngSlab.residentBytes, Math.ceil(RGB8_BYTES / 4096) * 4096);
});
