// What the plain-JavaScript engine benches feed the engine and how they drive it: captures of
// every mode built from the deterministic crops of cli-args.mjs, the cases engine.mjs and
// gpu/probe.mjs time, and the closed loop of `concurrency` callers they all run. Plain
// JavaScript with no import from src/, like cli-args.mjs: these benches load whichever build
// they compare, and gpu/probe.mjs runs on a machine that has only the compiled build.
import { seededCrop } from './cli-args.mjs';

const CROPS = Array.from({ length: 8 }, (_, i) => seededCrop(i + 7));
const PROFILE = { rgb_single: 'rgb_single_v1', rgb_sequence: 'rgb_contiguous_v1', color: 'color_wrgb_v1' };

/** One rgb8 capture of `n` frames in `mode` (rgb_single, rgb_sequence, color), each frame's
 * pixels a fresh copy of one of the fixed crops (the engine transfers them). */
export function capture(id, mode, n = 1) {
  const frames = Array.from({ length: n }, (_, i) => ({
    source_index: i, timestamp_us: i * 33_000, status: 'ok', source_size: [720, 1280], eyes_xy: [[300, 400], [380, 400]],
    image: { part: `${id}_${i}`, encoding: 'rgb8', sha256: '0'.repeat(64) },
    ...(mode === 'color' ? { phase: ['white', 'red', 'green', 'blue'][i] } : {}),
  }));
  return {
    packet: { protocol_version: 1, capture_id: id, mode, capture_profile: PROFILE[mode], preprocess_profile: 'eye_crop_320_v1', complete: true, frames },
    pixels: frames.map((_, i) => CROPS[i % CROPS.length].slice()),
  };
}

/** The engine cases, by name: one call's captures for call number `k`. color4 needs a set
 * with the colour module. */
export const CASES = {
  single: { module: 'rgb_liveness', job: (k) => [capture(`s${k}`, 'rgb_single')] },
  sequence20: { module: 'rgb_liveness', job: (k) => [capture(`q${k}`, 'rgb_sequence', 20)] },
  batch32: { module: 'rgb_liveness', job: (k) => Array.from({ length: 32 }, (_, i) => capture(`b${k}_${i}`, 'rgb_single')) },
  color4: { module: 'color_liveness', job: (k) => [capture(`c${k}`, 'color', 4)] },
};

/** `concurrency` callers calling `call()` back to back for `seconds`. `call` may resolve with
 * how many units it did (captures; default 1). Units per second, calls, and the latency
 * quantiles of a call in microseconds. */
export async function drive(call, concurrency, seconds) {
  const lat = [];
  let units = 0;
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) {
      const s = performance.now();
      const n = await call();
      lat.push(performance.now() - s);
      units += typeof n === 'number' ? n : 1;
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] * 1000;
  return { calls: lat.length, per_s: units / wall, p50_us: q(0.5), p99_us: q(0.99) };
}
