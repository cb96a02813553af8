// Which graphs keep NCHW on WebGPU: the scan of the ONNX file that finds a Conv the
// provider misreads in NHWC (src/inference/webgpu-layout.ts). The wrong answers themselves
// are shown on SwiftShader by webgpu-swiftshader.test.ts; this checks the scan on the
// shipped graphs and on single-Conv graphs around the boundary, without a GPU.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { GraphBuilder } from '../../models/builder/graph.ts';
import { conv, type Ctx } from '../../models/builder/layers.ts';
import { prng } from '../../models/builder/prng.ts';
import { hasMisreadConv, webGpuProvider } from '../../src/inference/webgpu-layout.ts';

const MODELS = join(import.meta.dirname, '../../models');

function convGraph(cin: number, cout: number, opts: { k?: number; group?: number; weightAs?: 'initializer' | 'input' } = {}): Uint8Array {
  const g = new GraphBuilder('c');
  const ctx: Ctx = { g, rand: prng(1) };
  const x = g.input('input', [1, cin, 16, 16]);
  if (!opts.weightAs || opts.weightAs === 'initializer') {
    conv(ctx, x, cin, cout, { k: opts.k, group: opts.group, relu: false });
  } else {
    // a weight the scan cannot size from an initialiser: a graph input
    const w = g.input('w', [cout, cin, 3, 3]);
    g.node('Conv', [x, w], { kernel_shape: [3, 3], pads: [1, 1, 1, 1] }, 'y');
  }
  g.output(opts.weightAs === 'input' ? 'y' : 'conv_3', [1, cout, 16, 16]);
  return g.encode('test graph: one Conv');
}

t.test('the shipped graphs: only the 9-channel colour difference branch keeps NCHW', async (t) => {
  const files = {
    'raw_v1/color_difference.onnx': true,
    'raw_v1/color_appearance.onnx': false,
    'raw_v1/rgb_frame.onnx': false,
    'raw_v1/temporal_head.onnx': false,
    'bgr80_ensemble_v1/bgr80_a.onnx': false,
    'bgr80_ensemble_v1/bgr80_b.onnx': false,
  };
  for (const [file, misread] of Object.entries(files)) {
    const model = readFileSync(join(MODELS, file));
    t.equal(hasMisreadConv(model), misread, file);
    t.same(webGpuProvider(model), misread ? { name: 'webgpu', preferredLayout: 'NCHW' } : { name: 'webgpu' });
  }
});

t.test('the boundary: input channels a multiple of 3, not of 4, above 3; output a multiple of 4; group 1', async (t) => {
  // [cin, cout, misread]; measured on SwiftShader: 6 and 9 wrong (max |diff| 1.7-2.2), 3, 4,
  // 5, 8, 12 and 24 right
  const cases: [number, number, boolean][] = [
    [3, 24, false], [4, 24, false], [5, 24, false], [6, 24, true], [8, 24, false], [9, 24, true],
    [9, 4, true], [9, 6, false], [12, 24, false], [15, 16, true], [24, 32, false],
  ];
  for (const [cin, cout, misread] of cases) t.equal(hasMisreadConv(convGraph(cin, cout)), misread, `${cin} -> ${cout}`);
  t.equal(hasMisreadConv(convGraph(9, 9, { group: 9 })), false, 'depthwise: the grouped kernel, not the matmul one');
  t.equal(hasMisreadConv(convGraph(9, 24, { k: 1 })), true, 'a 1x1 Conv counts too (the scan does not model the matmul shortcut)');
});

t.test('what the scan cannot size or read counts as misread: NCHW is slower, never wrong', async (t) => {
  t.equal(hasMisreadConv(convGraph(3, 8, { weightAs: 'input' })), true, 'a weight fed as a graph input');
  t.equal(hasMisreadConv(Uint8Array.from([0x3a, 0xff, 0xff])), true, 'a truncated file');
  t.equal(hasMisreadConv(new Uint8Array(0)), false, 'an empty file has no Conv (ORT refuses it on its own)');
});
