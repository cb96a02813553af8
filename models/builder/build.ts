// `npm run models:build`: regenerates every shipped model set. Output is a pure
// function of this code (fixed seeds), so a test can demand byte-identical files.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bgr80Graph } from './bgr80_ensemble_v1.ts';
import { COLOR_SIZE, FRAME_CROP, FRAME_SIZE, colorBranch, rgbFrame, temporalHead } from './raw_v1.ts';

export const MODELS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');

const UNIT = 1 / 255;
const NORM = { scale: UNIT, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25] };

function json(value: unknown): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
}

function rawV1(): Record<string, Uint8Array> {
  const colorInput = {
    input: 'input', output: 'logit', output_kind: 'logit', layout: 'NCHW', dtype: 'float32', batch: 1,
    crop_fraction: 0.6, size: COLOR_SIZE, channel_order: 'RGB', ...NORM,
  };
  const manifest = {
    format: 'liveness-model-set/1',
    model_set: 'raw_v1',
    trained: false,
    description:
      'Untrained reference graphs (fixed-seed random weights) with the production architectures and I/O contracts. ' +
      'Verdicts mean nothing until an operator installs trained graphs.',
    modules: {
      rgb_liveness: {
        graphs: [
          {
            role: 'frame', file: 'rgb_frame.onnx', input: 'image', output: 'logit', output_kind: 'logit',
            features_output: 'features', layout: 'NCHW', dtype: 'float32', batch: 'dynamic',
            crop_fraction: FRAME_CROP, size: FRAME_SIZE, channel_order: 'RGB', ...NORM,
          },
          { role: 'temporal', file: 'temporal_head.onnx', input: 'features', output: 'temporal_logit', output_kind: 'logit' },
        ],
        modes: {
          rgb_single: { decision_policy: 'single_frame_v1', threshold: 0.5 },
          rgb_sequence: { decision_policy: 'temporal_head_v1', threshold: 0.5, min_final_frames: 1, score_jump_limit: 0.5 },
        },
      },
      color_liveness: {
        graphs: [
          { role: 'color_difference', file: 'color_difference.onnx', ...colorInput },
          { role: 'color_appearance', file: 'color_appearance.onnx', ...colorInput },
        ],
        modes: {
          color: {
            decision_policy: 'color_fusion_v1', threshold: 0.5,
            fusion: { difference_weight: 0.5, appearance_weight: 0.5, bias: 0 },
          },
        },
      },
    },
  };
  return {
    'raw_v1/manifest.json': json(manifest),
    'raw_v1/rgb_frame.onnx': rgbFrame(),
    'raw_v1/temporal_head.onnx': temporalHead(),
    'raw_v1/color_difference.onnx': colorBranch('color_difference', 9, 0x5eed_0003),
    'raw_v1/color_appearance.onnx': colorBranch('color_appearance', 12, 0x5eed_0004),
  };
}

function bgr80EnsembleV1(): Record<string, Uint8Array> {
  const member = (file: string) => ({
    role: 'frame', file, input: 'input', output: 'probs', output_kind: 'softmax', live_index: 1,
    layout: 'NCHW', dtype: 'float32', batch: 1, crop_fraction: 0.25, size: 80, channel_order: 'BGR',
    scale: 1, mean: [0, 0, 0], std: [1, 1, 1],
  });
  const manifest = {
    format: 'liveness-model-set/1',
    model_set: 'bgr80_ensemble_v1',
    trained: false,
    description:
      'Second contract, deployed by manifest only: 80x80 centre of the crop, BGR, 0..255, NCHW, batch 1, ' +
      '3-class softmax with live class 1, two graphs averaged. Untrained fixed-seed weights.',
    modules: {
      rgb_liveness: {
        graphs: [member('bgr80_a.onnx'), member('bgr80_b.onnx')],
        modes: {
          rgb_single: { decision_policy: 'single_frame_v1', threshold: 0.5 },
          rgb_sequence: { decision_policy: 'window_mean_v1', threshold: 0.5, min_final_frames: 1, score_jump_limit: 0.5 },
        },
      },
    },
  };
  return {
    'bgr80_ensemble_v1/manifest.json': json(manifest),
    'bgr80_ensemble_v1/bgr80_a.onnx': bgr80Graph('bgr80_a', 0x5eed_0101, 8),
    'bgr80_ensemble_v1/bgr80_b.onnx': bgr80Graph('bgr80_b', 0x5eed_0102, 12),
  };
}

/** Every shipped file, keyed by its path relative to models/. */
export function buildModelSets(): Record<string, Uint8Array> {
  return { ...rawV1(), ...bgr80EnsembleV1() };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const [rel, bytes] of Object.entries(buildModelSets())) {
    const out = join(MODELS_DIR, rel);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, bytes);
    console.log(`${rel}  ${bytes.length} bytes`);
  }
}
