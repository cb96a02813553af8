import t from 'tap';
import { allocate, dims, prepareFrame, resample, writePlanes, type Plan } from '../../src/inference/preprocess.ts';
import { combine, liveProbability, logit, sigmoid } from '../../src/inference/scores.ts';

// A crop whose pixel (x, y) is (x % 256, y % 256, (x + y) % 256).
const crop = new Uint8Array(320 * 320 * 3);
for (let y = 0; y < 320; y++) {
  for (let x = 0; x < 320; x++) crop.set([x % 256, y % 256, (x + y) % 256], (y * 320 + x) * 3);
}
const at = (img: Float32Array, size: number, x: number, y: number, c: number) => img[(y * size + x) * 3 + c];

t.test('an exact sub-square is copied; an integer factor averages blocks', async (t) => {
  const same = resample(crop, 0.25, 80); // the centred 80 px: x 120..199
  t.equal(at(same, 80, 0, 0, 0), 120);
  t.equal(at(same, 80, 79, 5, 1), 125);
  const half = resample(crop, 0.5, 80); // 160 px from 80, 2x2 blocks
  t.equal(at(half, 80, 0, 0, 0), 80.5);
  t.equal(at(half, 80, 3, 0, 0), (86 + 87) / 2);
});

t.test('a non-integer factor samples bilinearly at pixel centres', async (t) => {
  const img = resample(crop, 0.6, 100); // 192 px from 64, factor 1.92
  const sx = 64 + 0.5 * 1.92 - 0.5; // 64.46
  t.ok(Math.abs(at(img, 100, 0, 0, 0) - sx) < 1e-4);
});

t.test('channel order, normalisation, layout and dtype all follow the plan', async (t) => {
  const plan: Plan = { crop_fraction: 0.25, size: 80, channel_order: 'BGR', scale: 2, mean: [10, 20, 30], std: [2, 4, 5], layout: 'NHWC', dtype: 'float32' };
  const planes = prepareFrame(plan, crop);
  const near = (got: number, want: number, msg: string) => t.ok(Math.abs(got - want) < 1e-4, `${msg}: ${got} vs ${want}`);
  const x = 3;
  const y = 2; // source pixel (123, 122): r 123, g 122, b 245
  near(planes[0][y * 80 + x], (245 * 2 - 10) / 2, 'model channel 0 is blue');
  near(planes[1][y * 80 + x], (122 * 2 - 20) / 4, 'model channel 1 is green');
  near(planes[2][y * 80 + x], (123 * 2 - 30) / 5, 'model channel 2 is red');
  const nhwc = allocate(plan, 2, 6);
  writePlanes(plan, nhwc, planes, 1, 3, 6);
  t.same(dims(plan, 2, 6), [2, 80, 80, 6]);
  t.equal(nhwc[6 * 6400 + (y * 80 + x) * 6 + 3], planes[0][y * 80 + x], 'NHWC: item 1, channel 3');
  const u8 = { ...plan, layout: 'NCHW' as const, dtype: 'uint8' as const, scale: 1, mean: [0, 0, 0], std: [1, 1, 1] };
  const raw = allocate(u8, 1, 3);
  t.ok(raw instanceof Uint8Array);
  writePlanes(u8, raw, prepareFrame(u8, crop), 0, 0, 3);
  t.same(dims(u8, 1, 3), [1, 3, 80, 80]);
  t.equal(raw[2 * 6400 + y * 80 + x], 123, 'NCHW uint8: red plane last in BGR');
});

t.test('a crop of the wrong size is refused', async (t) => {
  const plan: Plan = { crop_fraction: 1, size: 80, channel_order: 'RGB', scale: 1, mean: [0, 0, 0], std: [1, 1, 1], layout: 'NCHW', dtype: 'float32' };
  t.throws(() => prepareFrame(plan, new Uint8Array(100)), /307200/);
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
