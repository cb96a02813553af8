// Cross-check against an independent implementation: pngjs (bundled in playwright-core, a dev
// dependency) encodes, our decoder must return the very pixels; jpeg-js supplies a real JPEG.
import t from 'tap';
import { createRequire } from 'node:module';
import { decodePng, ImageError } from '../../src/images/index.ts';

const require = createRequire(import.meta.url);
const { PNG, jpegjs } = require('playwright-core/lib/utilsBundle') as {
  PNG: { sync: { write(png: { width: number; height: number; data: Buffer }, opts: Record<string, unknown>): Buffer } };
  jpegjs: { encode(img: { data: Buffer; width: number; height: number }, quality: number): { data: Buffer } };
};

function randomRgb(seed: number): Buffer {
  const out = Buffer.alloc(307200);
  let s = seed >>> 0;
  for (let i = 0; i < out.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    out[i] = s >>> 24;
  }
  return out;
}

function smoothRgb(): Buffer {
  const out = Buffer.alloc(307200);
  for (let y = 0; y < 320; y++) {
    for (let x = 0; x < 320; x++) {
      const o = (y * 320 + x) * 3;
      out[o] = (x * 3 + y) & 255;
      out[o + 1] = Math.round(128 + 100 * Math.sin(x / 17) * Math.cos(y / 23));
      out[o + 2] = (x ^ y) & 255;
    }
  }
  return out;
}

t.test('pngjs RGB output decodes to the same pixels, every filter type', async (t) => {
  for (const [name, rgb] of [['random', randomRgb(42)], ['smooth', smoothRgb()]] as const) {
    for (const filterType of [0, 1, 2, 3, 4, -1]) {
      const png = PNG.sync.write({ width: 320, height: 320, data: rgb }, { colorType: 2, inputHasAlpha: false, filterType });
      const out = decodePng(png);
      t.ok(Buffer.from(out).equals(rgb), `${name}, pngjs filter ${filterType}`);
    }
  }
});

t.test('pngjs RGBA output is refused as alpha', async (t) => {
  const rgba = Buffer.alloc(320 * 320 * 4, 255);
  const png = PNG.sync.write({ width: 320, height: 320, data: rgba }, { colorType: 6 });
  t.throws(() => decodePng(png), { name: 'ImageError', type: 'png_unsupported_color_type' });
});

t.test('a real JPEG is refused with a message that names it', async (t) => {
  const jpeg = jpegjs.encode({ data: Buffer.alloc(320 * 320 * 4, 128), width: 320, height: 320 }, 90).data;
  try {
    decodePng(jpeg);
    t.fail('accepted a JPEG');
  } catch (err) {
    t.ok(err instanceof ImageError);
    t.equal((err as ImageError).type, 'png_invalid_signature');
    t.match((err as ImageError).message, /JPEG/);
  }
});
