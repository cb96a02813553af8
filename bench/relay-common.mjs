// What bench/relay.mjs and its API-worker thread share: the capture and the timing loop.
function crop(seed) {
  const px = new Uint8Array(320 * 320 * 3);
  let s = seed >>> 0;
  for (let i = 0; i < px.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    px[i] = s >>> 24;
  }
  return px;
}
const CROP = crop(7);

/** One single-frame rgb8 capture; its pixels a fresh copy (the relay transfers them). */
export function capture(id) {
  const frames = [{
    source_index: 0, timestamp_us: 0, status: 'ok', source_size: [720, 1280], eyes_xy: [[300, 400], [380, 400]],
    image: { part: `${id}_0`, encoding: 'rgb8', sha256: '0'.repeat(64) },
  }];
  return {
    packet: { protocol_version: 1, capture_id: id, mode: 'rgb_single', capture_profile: 'rgb_single_v1', preprocess_profile: 'eye_crop_320_v1', complete: true, frames },
    pixels: [CROP.slice()],
  };
}

/** `concurrency` callers for `seconds`: calls/s and the latency quantiles (microseconds). */
export async function loop(call, concurrency, seconds) {
  const lat = [];
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) {
      const s = performance.now();
      await call();
      lat.push(performance.now() - s);
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] * 1000;
  return { calls: lat.length, per_s: lat.length / wall, p50_us: q(0.5), p99_us: q(0.99) };
}
