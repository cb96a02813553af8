// Synthetic captures for the inference tests: deterministic crops and packets that are
// valid per the spec (the engine trusts validation, so tests must not cheat it).
import type { CapturePacket, FrameRecord, PreparedCapture } from '../../src/packets/types.ts';
import type { FrameStatus, Mode, Phase, Point } from '../../src/contract/index.ts';
// the engines these tests start run their threads from the build when it matches the sources
// (issue 43: ~0.5-1 CPU-s an engine start; the rule: bench/harness/from-build.ts)
import '../helpers/from-build.ts';

export function crop(seed: number): Uint8Array {
  const px = new Uint8Array(320 * 320 * 3);
  let s = (seed * 2654435761) >>> 0;
  // smooth structure plus noise, so resampling choices matter. The wave sin(a(x,c) + b(y,c))
  // is expanded as sin a cos b + cos a sin b over per-column and per-row tables: a crop takes
  // ~4.5 ms instead of ~10 ms of Math.sin per sample (the inference tests make a few hundred),
  // and its bytes are those of the direct form (compared over 59 seeds: no byte differs).
  const sinA = new Float64Array(320 * 3);
  const cosA = new Float64Array(320 * 3);
  const sinB = new Float64Array(320 * 3);
  const cosB = new Float64Array(320 * 3);
  for (let i = 0; i < 320; i++) {
    for (let c = 0; c < 3; c++) {
      const a = (i * (c + 1)) / (17 + seed);
      const b = i / (23 + c * seed);
      sinA[i * 3 + c] = Math.sin(a);
      cosA[i * 3 + c] = Math.cos(a);
      sinB[i * 3 + c] = Math.sin(b);
      cosB[i * 3 + c] = Math.cos(b);
    }
  }
  for (let y = 0; y < 320; y++) {
    for (let x = 0; x < 320; x++) {
      for (let c = 0; c < 3; c++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        const wave = sinA[x * 3 + c]! * cosB[y * 3 + c]! + cosA[x * 3 + c]! * sinB[y * 3 + c]!;
        const v = Math.round(128 + 90 * wave + ((s >>> 24) - 128) / 4);
        px[(y * 320 + x) * 3 + c] = v < 0 ? 0 : v > 255 ? 255 : v;
      }
    }
  }
  return px;
}

export interface FrameSpec {
  index?: number;
  status?: FrameStatus;
  eyes?: [Point, Point];
  phase?: Phase;
  seed?: number;
}

const EYES: [Point, Point] = [[300, 400], [380, 400]];

export function capture(id: string, mode: Mode, specs: FrameSpec[], complete = true): PreparedCapture {
  let next = 0;
  const frames: FrameRecord[] = [];
  const pixels: (Uint8Array | null)[] = [];
  specs.forEach((f, i) => {
    const index = f.index ?? next;
    next = index + 1;
    const status = f.status ?? 'ok';
    const rec: FrameRecord = { source_index: index, timestamp_us: 1000 + index * 33_000, status };
    if (status === 'ok') {
      rec.source_size = [720, 1280];
      rec.eyes_xy = f.eyes ?? EYES;
      rec.image = { part: `${id}_${i}`, encoding: 'rgb8', sha256: '0'.repeat(64) };
    }
    if (mode === 'color') rec.phase = f.phase ?? (['white', 'red', 'green', 'blue'] as const)[i];
    frames.push(rec);
    pixels.push(status === 'ok' ? crop(f.seed ?? i + 1) : null);
  });
  const profile = mode === 'rgb_single' ? 'rgb_single_v1' : mode === 'rgb_sequence' ? 'rgb_contiguous_v1' : 'color_wrgb_v1';
  const packet: CapturePacket = {
    protocol_version: 1, capture_id: id, mode, capture_profile: profile, preprocess_profile: 'eye_crop_320_v1', complete, frames,
  };
  return { packet, pixels };
}

/** Copies of the pixels, for reference computations: infer() takes ownership of (and
 * transfers away) the buffers it is given. */
export function clonePixels(c: PreparedCapture): (Uint8Array | null)[] {
  return c.pixels.map((p) => (p ? new Uint8Array(p) : null));
}
