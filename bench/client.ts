// Client package figures: what a capture client pays per frame on the CPU (the crop, the
// Web Crypto hash, the multipart encoding) and what a browser downloads (the esbuild bundle).
//   node --import tsx bench/client.ts [--quick]
// CPU time per operation is printed next to wall time because on a shared machine the wall
// clock measures the neighbours as much as the code.
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';
import { buildCapture, encodeMultipart, eyeCrop320 } from '../client/src/index.ts';

function measure(name: string, n: number, fn: () => unknown): { name: string; n: number; wall_ms: number; cpu_ms: number } {
  for (let i = 0; i < Math.min(20, n); i++) fn();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) fn();
  const wall = (performance.now() - t0) / n;
  const c = process.cpuUsage(c0);
  return { name, n, wall_ms: +wall.toFixed(3), cpu_ms: +((c.user + c.system) / 1000 / n).toFixed(3) };
}

async function measureAsync(name: string, n: number, fn: () => Promise<unknown>) {
  for (let i = 0; i < Math.min(5, n); i++) await fn();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn();
  const wall = (performance.now() - t0) / n;
  const c = process.cpuUsage(c0);
  return { name, n, wall_ms: +wall.toFixed(3), cpu_ms: +((c.user + c.system) / 1000 / n).toFixed(3) };
}

export async function benchClient({ quick = false } = {}) {
  const n = quick ? 30 : 200;
  const W = 1280;
  const H = 720;
  const rgba = new Uint8ClampedArray(W * H * 4);
  const rgb = new Uint8Array(W * H * 3);
  for (let i = 0; i < rgba.length; i++) rgba[i] = (i * 31) & 255;
  for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 31) & 255;
  const eyes: [[number, number], [number, number]] = [[560, 300], [720, 305]];
  const crop = eyeCrop320({ data: rgb, width: W, height: H }, eyes);
  const frames = Array.from({ length: 32 }, (_, i) => ({ timestamp_us: i * 33_333, source_size: [W, H] as [number, number], eyes_xy: eyes, image: { bytes: crop } }));
  const sequence = await buildCapture({ mode: 'rgb_sequence', frames });

  const rows = [
    measure('eyeCrop320, 1280x720 RGBA (canvas ImageData)', n, () => eyeCrop320({ data: rgba, width: W, height: H }, eyes)),
    measure('eyeCrop320, 1280x720 RGB', n, () => eyeCrop320({ data: rgb, width: W, height: H }, eyes)),
    await measureAsync('buildCapture, 1 rgb8 frame (Web Crypto SHA-256 of 307200 bytes)', n, () => buildCapture({ mode: 'rgb_single', frames: [frames[0]!] })),
    measure('encodeMultipart, 32 rgb8 frames (9.8 MB body)', Math.max(5, n / 10), () => encodeMultipart(sequence.metadata, sequence.files)),
  ];
  const bundle = await esbuild.build({ entryPoints: ['client/src/index.ts'], bundle: true, minify: true, format: 'esm', platform: 'browser', write: false });
  const js = bundle.outputFiles[0]!.contents;
  return { rows, bundle_bytes: js.length, bundle_gzip_bytes: gzipSync(js).length };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await benchClient({ quick: process.argv.includes('--quick') });
  for (const row of r.rows) console.log(`${row.name}: ${row.cpu_ms} ms CPU, ${row.wall_ms} ms wall (n=${row.n})`);
  console.log(`browser bundle (esbuild, minified): ${r.bundle_bytes} bytes, ${r.bundle_gzip_bytes} gzipped`);
}
