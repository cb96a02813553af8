// bgr80_ensemble_v1: proves the manifest path with a contract unlike raw_v1's:
// 80x80, BGR, raw 0..255 values, NCHW, fixed batch 1, 3-class softmax (live = 1),
// two graphs whose live probabilities are averaged.
import { GraphBuilder } from './graph.ts';
import { conv, dense, pool, type Ctx } from './layers.ts';
import { prng } from './prng.ts';

export function bgr80Graph(name: string, seed: number, width: number): Uint8Array {
  const g = new GraphBuilder(name);
  const ctx: Ctx = { g, rand: prng(seed) };
  const x = g.input('input', [1, 3, 80, 80]);
  // The graph owns its normalisation, as a model exported with raw-pixel input does.
  const scaled = g.node('Mul', [x, g.weight('scale', [1], new Float32Array([1 / 255]))]);
  let h = g.node('Sub', [scaled, g.weight('mean', [1], new Float32Array([0.5]))]);
  h = conv(ctx, h, 3, width, { stride: 2 }); // 40
  h = conv(ctx, h, width, 2 * width, { stride: 2 }); // 20
  h = conv(ctx, h, 2 * width, 2 * width, { stride: 2 }); // 10
  h = pool(g, h);
  const logits = dense(ctx, h, 2 * width, 3, { gain: 0.5 });
  g.node('Softmax', [logits], { axis: 1 }, 'probs');
  g.output('probs', [1, 3]);
  return g.encode(`bgr80_ensemble_v1 member ${name} (untrained, fixed-seed weights)`);
}
