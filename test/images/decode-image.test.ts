import t from 'tap';
import { ValidationFailure } from '../../src/errors/codes.ts';
import { decodeImage, encodePng, rgb8ToPixels, tryDecodeImage } from '../../src/images/index.ts';

const LOC = ['body', 'metadata', 'captures', 2, 'frames', 5, 'image'];

t.test('rgb8 is exactly 307200 bytes', async (t) => {
  for (const n of [307199, 307201, 0, 320 * 320 * 4]) {
    t.throws(() => rgb8ToPixels(new Uint8Array(n)), { name: 'ImageError', type: 'rgb8_wrong_size' }, String(n));
  }
  const px = new Uint8Array(307200).map((_, i) => i % 251);
  const out = rgb8ToPixels(px);
  t.ok(Buffer.from(out).equals(Buffer.from(px)), 'bytes unchanged: no channel swap, no normalisation');
});

t.test('rgb8 pixels own exactly their buffer: a slice is copied, an exact buffer is passed on', async (t) => {
  const big = new Uint8Array(307200 + 100);
  big.fill(7);
  const slice = big.subarray(50, 50 + 307200);
  const fromSlice = rgb8ToPixels(slice);
  t.equal(fromSlice.buffer.byteLength, 307200);
  t.not(fromSlice.buffer, big.buffer, 'copied out of the larger buffer');
  const exact = new Uint8Array(307200);
  t.equal(rgb8ToPixels(exact).buffer, exact.buffer, 'no copy when the buffer already is exactly the image');
  const pooled = Buffer.from(new Uint8Array(307200)); // Buffer.from copies into its own allocation
  t.equal(rgb8ToPixels(pooled).buffer.byteLength, 307200);
  // a multipart part's storage is resizable: its pixels go out in a plain buffer (fast reads)
  const rab = new (ArrayBuffer as any)(307200, { maxByteLength: 1 << 20 }) as ArrayBuffer;
  new Uint8Array(rab).fill(9);
  const fromPart = rgb8ToPixels(Buffer.from(rab, 0, 307200));
  t.equal((fromPart.buffer as any).resizable, false, 'copied out of the resizable storage');
  t.equal(fromPart[307199], 9);
});

t.test('decodeImage turns a bad image into a 422 item at the frame image', async (t) => {
  const err = t.throws(() => decodeImage('png', Buffer.from('GIF89a'), LOC)) as unknown;
  t.ok(err instanceof ValidationFailure);
  const [issue] = (err as ValidationFailure).detail;
  t.same(issue.loc, LOC);
  t.equal(issue.type, 'png_invalid_signature');
  const wrongSize = tryDecodeImage('png', encodePng(new Uint8Array(100 * 100 * 3), 100, 100), LOC);
  t.equal(wrongSize.issue?.type, 'png_wrong_size');
  t.same(wrongSize.issue?.ctx, { width: 100, height: 100, expected_width: 320, expected_height: 320 });
  t.equal(tryDecodeImage('rgb8', new Uint8Array(5), LOC).issue?.type, 'rgb8_wrong_size');
});

t.test('the declared encoding decides: PNG bytes declared rgb8 and vice versa are rejected', async (t) => {
  const rgb = new Uint8Array(307200).fill(9);
  const png = encodePng(rgb);
  t.equal(tryDecodeImage('rgb8', png, LOC).issue?.type, 'rgb8_wrong_size');
  t.equal(tryDecodeImage('png', rgb, LOC).issue?.type, 'png_invalid_signature');
  const ok = tryDecodeImage('png', png, LOC);
  t.ok(ok.pixels && Buffer.from(ok.pixels).equals(Buffer.from(rgb)));
});
