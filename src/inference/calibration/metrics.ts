// Presentation-attack error rates as ISO/IEC 30107-3 defines them, for a service that calls a
// capture live when score > threshold (strictly, as decisions do):
//   APCER: share of attack presentations accepted as bona fide (score > t)
//   BPCER: share of bona fide presentations rejected as attacks (score <= t)
//   ACER:  (APCER + BPCER) / 2 (withdrawn from the 2023 edition, still widely quoted)
// Pure functions over score lists, so the figures are tested with hand-counted examples.

export interface Rates {
  threshold: number;
  apcer: number;
  bpcer: number;
  acer: number;
  /** attacks accepted / attacks, bona fide rejected / bona fide: the counts behind the rates */
  attacks_accepted: number;
  bona_fide_rejected: number;
}

export interface TargetPoint extends Rates {
  target_bpcer: number;
}

export interface Eer {
  /** the equal error rate, interpolated linearly between the two sweep points around it */
  eer: number;
  /** the threshold at the first sweep point where BPCER >= APCER */
  threshold: number;
}

export interface CurvePoint {
  threshold: number;
  apcer: number;
  bpcer: number;
}

export function ratesAt(live: readonly number[], attack: readonly number[], threshold: number): Rates {
  const accepted = attack.filter((s) => s > threshold).length;
  const rejected = live.filter((s) => s <= threshold).length;
  const apcer = attack.length ? accepted / attack.length : 0;
  const bpcer = live.length ? rejected / live.length : 0;
  return { threshold, apcer, bpcer, acer: (apcer + bpcer) / 2, attacks_accepted: accepted, bona_fide_rejected: rejected };
}

/** Every distinct operating point: a threshold below every score, then each distinct score. */
export function curve(live: readonly number[], attack: readonly number[]): CurvePoint[] {
  const all = [...new Set([...live, ...attack])].sort((a, b) => a - b);
  const thresholds = [all.length ? Math.min(0, all[0]! - 1e-9) : 0, ...all];
  const sortedLive = [...live].sort((a, b) => a - b);
  const sortedAttack = [...attack].sort((a, b) => a - b);
  // counts of scores <= t by a moving index: O(n log n) for the sort, linear after
  let li = 0;
  let ai = 0;
  return thresholds.map((t) => {
    while (li < sortedLive.length && sortedLive[li]! <= t) li++;
    while (ai < sortedAttack.length && sortedAttack[ai]! <= t) ai++;
    return {
      threshold: t,
      apcer: sortedAttack.length ? (sortedAttack.length - ai) / sortedAttack.length : 0,
      bpcer: sortedLive.length ? li / sortedLive.length : 0,
    };
  });
}

/**
 * The threshold that rejects at most `target` of the bona fide presentations while
 * accepting as few attacks as possible: the largest observed score still below the
 * (floor(target * n) + 1)-th lowest live score. Null when even the lowest threshold
 * rejects too many (ties at the bottom of the live scores).
 */
export function thresholdForBpcer(live: readonly number[], attack: readonly number[], target: number): TargetPoint | null {
  if (live.length === 0) return null;
  const sorted = [...live].sort((a, b) => a - b);
  const allowed = Math.floor(target * sorted.length + 1e-9);
  if (allowed >= sorted.length) return { target_bpcer: target, ...ratesAt(live, attack, Math.max(...live, ...attack)) };
  const bound = sorted[allowed]!;
  let best = -Infinity;
  for (const s of [...live, ...attack]) if (s < bound && s > best) best = s;
  if (best === -Infinity) {
    // no score below the bound: any threshold under it will do (scores are probabilities)
    if (bound <= 0) return null;
    best = 0;
  }
  const r = ratesAt(live, attack, best);
  return r.bpcer <= target + 1e-12 ? { target_bpcer: target, ...r } : null;
}

export function equalErrorRate(points: readonly CurvePoint[]): Eer | null {
  if (points.length === 0) return null;
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    if (p.bpcer >= p.apcer) {
      if (i === 0) return { eer: (p.apcer + p.bpcer) / 2, threshold: p.threshold };
      const q = points[i - 1]!;
      // APCER falls and BPCER rises along the sweep; d changes sign between q and p
      const d0 = q.apcer - q.bpcer;
      const d1 = p.apcer - p.bpcer;
      const lambda = d0 / (d0 - d1);
      return { eer: q.apcer + lambda * (p.apcer - q.apcer), threshold: p.threshold };
    }
  }
  const last = points[points.length - 1]!;
  return { eer: (last.apcer + last.bpcer) / 2, threshold: last.threshold };
}
