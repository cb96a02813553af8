// Tiny ONNX graphs the tests build, with weights chosen by hand so their outputs are known:
// a brightness scorer (live probability rises with the crop's mean value), and graphs whose
// outputs break the manifest's promises (logits declared as softmax, NaN).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { GraphBuilder } from '../../models/builder/graph.ts';
import { pool } from '../../models/builder/layers.ts';

export type Head = 'logit' | 'logits' | 'softmax' | 'nan';

/**
 * Input `input` [N, 3, size, size], values v (the manifest's scale/mean/std applied). With
 * m the mean of v over the image: head `logit` returns gain*(m - centre) as [N, 1];
 * `logits` returns 3 class logits [-(gain*(m-centre)), gain*(m-centre), 0]; `softmax` the
 * softmax of those; `nan` returns sqrt(-1 - m) (NaN for every input with m > -1).
 */
export function brightnessGraph(head: Head, size: number, gain: number, centre: number): Uint8Array {
  const g = new GraphBuilder(`brightness_${head}`);
  const x = g.input('input', ['N', 3, size, size]);
  const m3 = pool(g, x); // [N, 3] channel means
  if (head === 'nan') {
    const m = g.node('Gemm', [m3, g.weight('w', [1, 3], new Float32Array([-1 / 3, -1 / 3, -1 / 3])), g.weight('b', [1], new Float32Array([-1]))], { transB: 1 });
    g.node('Sqrt', [m], {}, 'score');
    g.output('score', ['N', 1]);
    return g.encode('test graph: NaN');
  }
  const k = gain / 3;
  if (head === 'logit') {
    g.node('Gemm', [m3, g.weight('w', [1, 3], new Float32Array([k, k, k])), g.weight('b', [1], new Float32Array([-gain * centre]))], { transB: 1 }, 'score');
    g.output('score', ['N', 1]);
    return g.encode('test graph: brightness logit');
  }
  const w = new Float32Array([-k, -k, -k, k, k, k, 0, 0, 0]);
  const b = new Float32Array([gain * centre, -gain * centre, 0]);
  const logits = g.node('Gemm', [m3, g.weight('w', [3, 3], w), g.weight('b', [3], b)], { transB: 1 }, head === 'logits' ? 'score' : undefined);
  if (head === 'softmax') g.node('Softmax', [logits], { axis: 1 }, 'score');
  g.output('score', ['N', 3]);
  return g.encode(`test graph: brightness ${head}`);
}

export interface TestSet {
  root: string;
  name: string;
  dir: string;
}

/** A one-graph rgb_liveness model set in a temporary folder: the frame graph on the whole
 * crop at 32x32, values pixel/255, declared with `kind` (which may differ from `head`). */
export function brightnessSet(
  t: Test,
  opts: { name?: string; head: Head; kind: string; live_index?: number; threshold?: number; gain?: number; centre?: number; root?: string },
): TestSet {
  const root = opts.root ?? mkdtempSync(join(tmpdir(), 'models-'));
  if (!opts.root) t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const name = opts.name ?? 'bright_v1';
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'bright.onnx'), brightnessGraph(opts.head, 32, opts.gain ?? 8, opts.centre ?? 0.5));
  const graph: Record<string, unknown> = {
    role: 'frame', file: 'bright.onnx', input: 'input', output: 'score', output_kind: opts.kind,
    layout: 'NCHW', dtype: 'float32', batch: 'dynamic', crop_fraction: 1, size: 32, channel_order: 'RGB',
    scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1],
  };
  if (opts.live_index !== undefined) graph.live_index = opts.live_index;
  const manifest = {
    format: 'liveness-model-set/1', model_set: name, trained: true,
    modules: {
      rgb_liveness: {
        graphs: [graph],
        modes: {
          rgb_single: { decision_policy: 'single_frame_v1', threshold: opts.threshold ?? 0.5 },
          rgb_sequence: { decision_policy: 'window_mean_v1', threshold: opts.threshold ?? 0.5, score_jump_limit: 1 },
        },
      },
    },
  };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
  return { root, name, dir };
}
