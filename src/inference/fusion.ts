// Colour fusion: the two branch logits combined linearly with the manifest's weights;
// the capture's score is the sigmoid of the fused logit.
import type { ColorModeSpec } from './manifest.ts';
import { sigmoid } from './scores.ts';
import type { ColorLogits } from './types.ts';

export function fuse(fusion: ColorModeSpec['fusion'], difference: number, appearance: number): { logits: ColorLogits; score: number } {
  const fused = fusion.difference_weight * difference + fusion.appearance_weight * appearance + fusion.bias;
  return { logits: { difference, appearance, fused }, score: sigmoid(fused) };
}
