import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadManifest } from '../../src/inference/index.ts';
import { allocate, dims, FramePreparer, InputBuffer, prepareFrame, type Plan } from '../../src/inference/preprocess.ts';
import { combine, liveProbability, logit, sigmoid } from '../../src/inference/scores.ts';

// A crop whose pixel (x, y) is (x % 256, y % 256, (x + y) % 256).
const crop = new Uint8Array(320 * 320 * 3);
for (let y = 0; y < 320; y++) {
  for (let x = 0; x < 320; x++) crop.set([x % 256, y % 256, (x + y) % 256], (y * 320 + x) * 3);
}

// Identity normalisation in NHWC float32: the tensor holds the resampled RGB values.
const plain = (crop_fraction: number, size: number, resize?: Plan['resize']): Plan =>
  ({ crop_fraction, size, resize, channel_order: 'RGB', scale: 1, mean: [0, 0, 0], std: [1, 1, 1], layout: 'NHWC', dtype: 'float32' });

function image(plan: Plan): (x: number, y: number, c: number) => number {
  const out = allocate(plan, 1, 3);
  new FramePreparer(plan).write(crop, out, 0, 0, 3);
  return (x, y, c) => out[(y * plan.size + x) * 3 + c];
}

function near(t: Test, got: number, want: number, msg: string, tol = 1e-4): void {
  t.ok(Math.abs(got - want) < tol, `${msg}: ${got} vs ${want}`);
}

t.test('area: an exact sub-square is copied; an integer factor averages blocks', async (t) => {
  const same = image(plain(0.25, 80)); // the centred 80 px: x 120..199
  t.equal(same(0, 0, 0), 120);
  t.equal(same(79, 5, 1), 125);
  const half = image(plain(0.5, 80)); // 160 px from 80, 2x2 blocks
  t.equal(half(0, 0, 0), 80.5);
  t.equal(half(3, 0, 0), (86 + 87) / 2);
  t.equal(half(2, 1, 2), (84 + 82 + 85 + 82 + 84 + 83 + 85 + 83) / 4, 'b = x + y over the block x 84..85, y 82..83');
});

t.test('area is the default and weighs partly covered pixels by the part covered', async (t) => {
  // 0.6 of 320 = 192 px from 64, to 100: each output pixel covers 1.92 source pixels.
  const img = image(plain(0.6, 100));
  t.same(image(plain(0.6, 100, 'area'))(7, 9, 2), img(7, 9, 2), 'area is the default');
  near(t, img(0, 0, 0), (64 * 1 + 65 * 0.92) / 1.92, 'x 0 covers [64, 65.92)');
  near(t, img(1, 0, 0), (65 * 0.08 + 66 * 1 + 67 * 0.84) / 1.92, 'x 1 covers [65.92, 67.84)');
  near(t, img(0, 1, 1), (65 * 0.08 + 66 * 1 + 67 * 0.84) / 1.92, 'rows weigh the same way');
});

t.test('bilinear follows OpenCV INTER_LINEAR: half-pixel centres, edges clamped', async (t) => {
  // The whole crop to 128 (the peers' tiny128): source x = (x + 0.5) * 2.5 - 0.5.
  const img = image(plain(1, 128, 'bilinear'));
  near(t, img(0, 0, 0), 0.75, 'x 0 samples 0.75');
  near(t, img(1, 0, 0), 3.25, 'x 1 samples 3.25');
  near(t, img(127, 0, 0), 62 * 0.75 + 63 * 0.25, 'x 127 samples 318.25 (pixels 318 and 319 hold 62 and 63)');
  near(t, img(0, 0, 2), 1.5, 'b = x + y at (0.75, 0.75)');
  near(t, img(5, 3, 1), 3 * 2.5 + 0.75, 'rows sample the same way');
  // enlarging the centred 80 px (120..199) to 160: source x = 120 + (x + 0.5) / 2 - 0.5
  const up = image(plain(0.25, 160, 'bilinear'));
  t.equal(up(0, 0, 0), 120, 'x 0 (119.75) is clamped to the first pixel of the sub-square');
  near(t, up(1, 0, 0), 120.25, 'x 1 samples 120.25');
  t.equal(up(159, 0, 0), 199, 'x 159 (199.25) is clamped to the last');
  // at an integer factor, bilinear is not the block mean: 320 -> 160 samples between 2 pixels
  const bi = image(plain(1, 160, 'bilinear'));
  near(t, bi(3, 0, 0), 6.5, 'bilinear at factor 2');
});

t.test('channel order, normalisation, layout and dtype all follow the plan', async (t) => {
  const plan: Plan = { crop_fraction: 0.25, size: 80, channel_order: 'BGR', scale: 2, mean: [10, 20, 30], std: [2, 4, 5], layout: 'NHWC', dtype: 'float32' };
  const planes = prepareFrame(plan, crop);
  const x = 3;
  const y = 2; // source pixel (123, 122): r 123, g 122, b 245
  near(t, planes[0][y * 80 + x], (245 * 2 - 10) / 2, 'model channel 0 is blue');
  near(t, planes[1][y * 80 + x], (122 * 2 - 20) / 4, 'model channel 1 is green');
  near(t, planes[2][y * 80 + x], (123 * 2 - 30) / 5, 'model channel 2 is red');
  const nhwc = allocate(plan, 2, 6);
  new FramePreparer(plan).write(crop, nhwc, 1, 3, 6);
  t.same(dims(plan, 2, 6), [2, 80, 80, 6]);
  t.equal(nhwc[6 * 6400 + (y * 80 + x) * 6 + 3], planes[0][y * 80 + x], 'NHWC: item 1, channel 3');
  t.equal(nhwc[(y * 80 + x) * 6 + 3], 0, 'item 0 untouched');
  const u8 = { ...plan, layout: 'NCHW' as const, dtype: 'uint8' as const, scale: 1, mean: [0, 0, 0], std: [1, 1, 1] };
  const buf = new InputBuffer(u8, 1, 3);
  t.ok(buf.data instanceof Uint8Array);
  new FramePreparer(u8).write(crop, buf.data, 0, 0, 3);
  t.same(buf.dims(1), [1, 3, 80, 80]);
  t.equal(buf.data[2 * 6400 + y * 80 + x], 123, 'NCHW uint8: red plane last in BGR');
  const clamp = { ...u8, scale: 4 };
  const clamped = allocate(clamp, 1, 3);
  new FramePreparer(clamp).write(crop, clamped, 0, 0, 3);
  t.equal(clamped[2 * 6400 + y * 80 + x], 255, 'uint8 clamps at 255');
});

t.test('a reused input buffer gives views of 1..capacity items over one allocation', async (t) => {
  const plan = plain(0.8, 128);
  const buf = new InputBuffer(plan, 4, 3);
  t.equal(buf.view(2).length, 2 * 3 * 128 * 128);
  t.equal(buf.view(2).buffer, buf.data.buffer);
  t.equal(buf.view(2), buf.view(2), 'the same view object every time');
  t.same(buf.dims(4), [4, 128, 128, 3]);
});

t.test('a crop of the wrong size is refused', async (t) => {
  t.throws(() => prepareFrame(plain(1, 80), new Uint8Array(100)), /307200/);
});

t.test('the manifest takes resize "area" or "bilinear" per image graph, and nothing else', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'resize-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  // the set's folder is named as its manifest names it (loadManifest holds them to it)
  const dir = join(root, 'raw_v1');
  cpSync(join(import.meta.dirname, '../../models/raw_v1'), dir, { recursive: true });
  const original = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  const write = (resize: unknown) => {
    const m = structuredClone(original);
    m.modules.rgb_liveness.graphs[0].resize = resize;
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify(m));
  };
  write('bilinear');
  t.equal((loadManifest(dir).modules.rgb_liveness!.graphs[0] as Plan).resize, 'bilinear');
  write('bicubic');
  t.throws(() => loadManifest(dir), /modules\.rgb_liveness\.graphs\[0\]\.resize must be "area" or "bilinear"/);
});

t.test('output kinds give a live probability; ensembles average it', async (t) => {
  t.equal(liveProbability('logit', [0, 2], 1, 1, undefined), sigmoid(2));
  t.equal(liveProbability('probability', [0.3], 0, 1, undefined), 0.3);
  t.equal(liveProbability('softmax', [0.1, 0.7, 0.2, 0.5, 0.25, 0.25], 1, 3, 1), 0.25);
  const e = [Math.exp(1), Math.exp(2), Math.exp(0)];
  t.ok(Math.abs(liveProbability('logits', [1, 2, 0], 0, 3, 1) - e[1] / (e[0] + e[1] + e[2])) < 1e-12);
  t.same(combine([{ kind: 'logit', probability: sigmoid(1.5), raw: 1.5 }]), { probability: sigmoid(1.5), logit: 1.5 });
  const both = combine([
    { kind: 'softmax', probability: 0.2, raw: 0 },
    { kind: 'softmax', probability: 0.6, raw: 0 },
  ]);
  t.ok(Math.abs(both.probability - 0.4) < 1e-12);
  t.ok(Math.abs(both.logit - logit(0.4)) < 1e-12);
});
