// The PNG decoder's SIMD rows (src/images/rows-simd.ts, unfilter-simd.wat): the committed bytes
// are the .wat's, this Node takes them, and every sequence of row filters decodes to what the
// JavaScript rows (the reference, and the path of a runtime without SIMD) make of it. The
// decoder as a whole is checked against encoders in png-decode.test.ts (the project's) and
// png-interop.test.ts (pngjs, every filter type).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildSync } from 'esbuild';
import fc from 'fast-check';
import { compileWat, moduleSource, targetOf, watFiles } from '../../scripts/build-wasm.mjs';
import { decodePng, encodePng } from '../../src/images/index.ts';
import { unfilter } from '../../src/images/png-decode.ts';
import { simdRows } from '../../src/images/rows-simd.ts';
import { noise } from './hostile-pngs.ts';

const ROOT = join(import.meta.dirname, '../..');

t.test('each committed X-wasm.ts is what its .wat compiles to', async (t) => {
  const files = watFiles();
  t.ok(files.includes('src/images/unfilter-simd.wat'), 'the unfilter kernels are among them');
  for (const file of files) {
    const committed = readFileSync(join(ROOT, targetOf(file)), 'utf8');
    t.equal(committed, moduleSource(file, await compileWat(file)), `${targetOf(file)} matches ${file} (node scripts/build-wasm.mjs)`);
  }
});

t.test('this Node runs the SIMD rows, with the inflate output in their memory', async (t) => {
  const rows = simdRows();
  t.not(rows, null, 'WebAssembly SIMD loads');
  t.equal(simdRows(), rows, 'one instance per thread');
  t.equal(rows!.raw.buffer, rows!.pixels.buffer, 'inflate output and pixels share the kernels\' memory');
});

/** A 320x320 RGB PNG of the given filtered rows (each 961 bytes: filter byte, then 960): the
 * project's encoder, its scanlines replaced by these. */
const pngOfRows = (raw: Uint8Array) => encodePng(new Uint8Array(307200), 320, 320, { filter: 0, level: 1, transformRaw: () => raw });

t.test('any sequence of row filters over any bytes: the SIMD decode equals the JavaScript rows', async (t) => {
  let runs = 0;
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 320, maxLength: 320 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (filters, seed) => {
      const raw = new Uint8Array(320 * 961);
      const bytes = noise(seed, raw.length);
      raw.set(bytes);
      // a third of the images with extreme bytes, where every lane's sum wraps past 255
      if (seed % 3 === 0) for (let i = 0; i < raw.length; i++) raw[i] = bytes[i] & 1 ? 255 : 254;
      for (let y = 0; y < 320; y++) raw[y * 961] = filters[y];
      const expected = unfilter(raw.slice());
      const got = decodePng(pngOfRows(raw));
      runs++;
      return Buffer.from(got).equals(Buffer.from(expected));
    }),
    { numRuns: 60 },
  );
  t.equal(runs, 60);
});

t.test('Average and Paeth rows of filtered bytes that take few values: Paeth\'s ties between b and c', async (t) => {
  // Filtered bytes near 0, 128 and 255 make pixels that differ little from their neighbours, so
  // Paeth's tie between b and c (pb = pc < pa) comes about 4,000 times in an all-Paeth image,
  // 27 times as often as over noise, and Average's a + b often exceeds 255 (the kernel halves it
  // in 16-bit lanes). A tie between a and b cannot change a pixel: pa = pb <= pc holds only
  // where a = b.
  const values = [0, 1, 2, 127, 128, 129, 253, 254, 255];
  let runs = 0;
  fc.assert(
    fc.property(fc.array(fc.constantFrom(3, 4), { minLength: 320, maxLength: 320 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (filters, seed) => {
      const raw = noise(seed, 320 * 961).map((b) => values[b % values.length]);
      for (let y = 0; y < 320; y++) raw[y * 961] = filters[y];
      runs++;
      return Buffer.from(decodePng(pngOfRows(raw))).equals(Buffer.from(unfilter(raw.slice())));
    }),
    { numRuns: 20 },
  );
  t.equal(runs, 20);
});

t.test('a row after a Sub row is whole: the byte the kernel writes past a Sub row is written again', async (t) => {
  // Sub rows, each followed by a row of one filter: that row starts at the byte Sub's last step
  // wrote; rows above it are read back by Up, Average and Paeth
  for (const next of [0, 1, 2, 3, 4] as const) {
    const raw = noise(7, 320 * 961);
    for (let y = 0; y < 320; y++) raw[y * 961] = y % 2 === 0 ? 1 : next;
    t.ok(Buffer.from(decodePng(pngOfRows(raw))).equals(Buffer.from(unfilter(raw.slice()))), `Sub then ${next}`);
  }
});

t.test('where the kernels\' memory cannot be made (a tight ulimit -v), the decoder keeps its JavaScript rows', async (t) => {
  // The decoder bundled here, then run by plain node under 6 GB of address space: enough for
  // node, not for a WebAssembly memory's reservation (tsx itself starts WebAssembly, so it
  // cannot run there).
  const dir = mkdtempSync(join(tmpdir(), 'lv-ulimit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const bundle = join(dir, 'decoder.mjs');
  buildSync({
    stdin: { contents: "export { simdRows } from './src/images/rows-simd.ts';\nexport { decodePng, encodePng } from './src/images/index.ts';", resolveDir: ROOT, loader: 'ts' },
    bundle: true, format: 'esm', platform: 'node', outfile: bundle, logLevel: 'error',
  });
  const script = [
    `const { simdRows, decodePng, encodePng } = await import(${JSON.stringify(pathToFileURL(bundle).href)});`,
    'const rgb = new Uint8Array(307200).map((_, i) => (i * 37) % 251);',
    'const out = decodePng(encodePng(rgb, 320, 320, { filter: "cycle" }));',
    'console.log(JSON.stringify({ simd: simdRows() !== null, same: Buffer.from(out).equals(Buffer.from(rgb)) }));',
  ].join('\n');
  const r = spawnSync('bash', ['-c', 'ulimit -v 6000000 && exec "$0" --input-type=module -e "$1"', process.execPath, script], { encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  t.same(JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null'), { simd: false, same: true }, 'no kernels, the same pixels');
});
