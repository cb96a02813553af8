// Reading a live probability out of whatever a graph's manifest says it returns, and
// combining ensemble members (their live probabilities are averaged).
import type { OutputKindName } from './manifest.ts';

export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/** Inverse of sigmoid, clamped so a saturated probability still gives a finite logit. */
export function logit(p: number): number {
  const q = Math.min(1 - 1e-7, Math.max(1e-7, p));
  return Math.log(q / (1 - q));
}

/** Live probability of batch item `item` from an output with `width` values per item. */
export function liveProbability(
  kind: OutputKindName,
  data: ArrayLike<number>,
  item: number,
  width: number,
  liveIndex: number | undefined,
): number {
  const o = item * width;
  switch (kind) {
    case 'logit':
      return sigmoid(data[o]);
    case 'probability':
      return Math.min(1, Math.max(0, data[o]));
    case 'softmax':
      return Math.min(1, Math.max(0, data[o + (liveIndex ?? 0)]));
    case 'logits': {
      let max = -Infinity;
      for (let i = 0; i < width; i++) max = Math.max(max, data[o + i]);
      let sum = 0;
      for (let i = 0; i < width; i++) sum += Math.exp(data[o + i] - max);
      return Math.exp(data[o + (liveIndex ?? 0)] - max) / sum;
    }
  }
}

/** An ensemble's result: the mean live probability, and a logit for diagnostics. A lone
 * logit graph reports its own logit unchanged rather than logit(sigmoid(x)). */
export interface Combined {
  probability: number;
  logit: number;
}

/** One ensemble member's reading of one item: its live probability and its first raw output value. */
export interface Member {
  kind: OutputKindName;
  probability: number;
  raw: number;
}

export function combine(members: Member[]): Combined {
  if (members.length === 1 && members[0].kind === 'logit') {
    return { probability: members[0].probability, logit: members[0].raw };
  }
  const p = members.reduce((s, m) => s + m.probability, 0) / members.length;
  return { probability: p, logit: logit(p) };
}
