// Deterministic weights: a 32-bit PRNG and only correctly rounded float operations
// (+, *, sqrt, fround), so the same seed gives the same bytes on any machine.

/** mulberry32: small, fast, and fully specified by its integer arithmetic. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Kaiming-uniform values U(-b, b), b = gain * sqrt(6 / fanIn). */
export function kaimingUniform(rand: () => number, count: number, fanIn: number, gain = 1): Float32Array {
  const bound = gain * Math.sqrt(6 / fanIn);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (rand() * 2 - 1) * bound;
  return out;
}

export function uniform(rand: () => number, count: number, lo: number, hi: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = lo + rand() * (hi - lo);
  return out;
}
