// Layer helpers with fixed-seed initialisation; each call draws from the same PRNG in
// a fixed order, which is what makes a rebuild byte-identical.
import type { GraphBuilder } from './graph.ts';
import { kaimingUniform, uniform } from './prng.ts';

export interface Ctx {
  g: GraphBuilder;
  rand: () => number;
}

export function conv(
  { g, rand }: Ctx,
  x: string,
  cin: number,
  cout: number,
  opts: { k?: number; stride?: number; group?: number; relu?: boolean } = {},
): string {
  const k = opts.k ?? 3;
  const stride = opts.stride ?? 1;
  const group = opts.group ?? 1;
  const fanIn = (cin / group) * k * k;
  const w = g.weight('conv_w', [cout, cin / group, k, k], kaimingUniform(rand, cout * (cin / group) * k * k, fanIn, 1));
  const b = g.weight('conv_b', [cout], uniform(rand, cout, -0.05, 0.05));
  const pad = (k - 1) >> 1;
  const y = g.node('Conv', [x, w, b], {
    group,
    kernel_shape: [k, k],
    pads: [pad, pad, pad, pad],
    strides: [stride, stride],
  });
  return opts.relu === false ? y : g.node('Relu', [y]);
}

/** Depthwise 3x3 then pointwise 1x1: the MobileNet/MiniFASNet building block. */
export function separable(ctx: Ctx, x: string, cin: number, cout: number, stride: number): string {
  const dw = conv(ctx, x, cin, cin, { k: 3, stride, group: cin });
  return conv(ctx, dw, cin, cout, { k: 1 });
}

export function dense(
  { g, rand }: Ctx,
  x: string,
  nin: number,
  nout: number,
  opts: { relu?: boolean; gain?: number; out?: string; bias?: number } = {},
): string {
  // Gemm with transB=1 keeps the weight as [out, in], like a torch Linear.
  const w = g.weight('fc_w', [nout, nin], kaimingUniform(rand, nout * nin, nin, opts.gain ?? Math.SQRT2));
  const b = g.weight('fc_b', [nout], uniform(rand, nout, -0.05, 0.05).map((v) => v + (opts.bias ?? 0)));
  const relu = opts.relu ?? false;
  const y = g.node('Gemm', [x, w, b], { transB: 1 }, relu ? undefined : opts.out);
  return relu ? g.node('Relu', [y], {}, opts.out) : y;
}

/** Global average pool then flatten to [N, C]. */
export function pool(g: GraphBuilder, x: string): string {
  return g.node('Flatten', [g.node('GlobalAveragePool', [x])], { axis: 1 });
}
