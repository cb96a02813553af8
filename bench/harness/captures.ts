import { buildBatch, buildCapture, buildVerifyBody, encodePng, type CaptureInput } from '../../src/client/index.ts';
import type { Mode } from '../../src/contract/index.ts';

/** Deterministic 320x320 RGB test crops (xorshift noise over a gradient), distinct per seed. */
export function crop(seed: number): Uint8Array {
  const px = new Uint8Array(320 * 320 * 3);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < px.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    const pos = Math.floor(i / 3);
    px[i] = ((pos % 320) + (pos / 320) * 0.5 + (x & 63) + seed * 7) & 255;
  }
  return px;
}

export const SOURCE_SIZE: [number, number] = [640, 480];
export const EYES: [[number, number], [number, number]] = [[280, 200], [360, 202]];

// A crop's PNG (adaptive row filters, then zlib) takes ~25 ms to encode here once the encoder
// is optimised, more in a short test process, and the tests build the same few seeds over and
// over: in a profiled run of the suite, building them was ~10 % of the test processes' sampled
// time (full-disk alone spent 17 s on it). So each seed's PNG is encoded once per process. Each
// caller gets its own copy, so a test that alters its bytes alters nothing else. Bounded, as
// a bench may ask for many seeds.
const pngs = new Map<number, Uint8Array>();
function pngOfCrop(seed: number): Uint8Array {
  let png = pngs.get(seed);
  if (png === undefined) {
    if (pngs.size >= 256) pngs.clear();
    png = new Uint8Array(encodePng(crop(seed)));
    pngs.set(seed, png);
  }
  return png.slice();
}

export function frameInput(i: number, opts: { encoding?: 'png' | 'rgb8'; seed?: number; eyes?: [[number, number], [number, number]] } = {}) {
  const seed = opts.seed ?? i + 1;
  const bytes = opts.encoding === 'rgb8' ? crop(seed) : pngOfCrop(seed);
  return { timestamp_us: 1_000_000 + i * 33_333, source_size: SOURCE_SIZE, eyes_xy: opts.eyes ?? EYES, image: { bytes } };
}

export function single(opts: { id?: string; encoding?: 'png' | 'rgb8'; seed?: number } = {}): CaptureInput {
  return { capture_id: opts.id, mode: 'rgb_single', frames: [frameInput(0, opts)] };
}

export function sequence(n: number, opts: { id?: string; encoding?: 'png' | 'rgb8' } = {}): CaptureInput {
  return { capture_id: opts.id, mode: 'rgb_sequence', frames: Array.from({ length: n }, (_, i) => frameInput(i, { ...opts, seed: i + 1 })) };
}

export function color(opts: { id?: string; encoding?: 'png' | 'rgb8'; phases?: number } = {}): CaptureInput {
  const phases = (['white', 'red', 'green', 'blue'] as const).slice(0, opts.phases ?? 4);
  return {
    capture_id: opts.id,
    mode: 'color',
    complete: phases.length === 4,
    frames: phases.map((phase, i) => ({ ...frameInput(i, { ...opts, seed: 10 + i }), phase, display_time_us: 1_000_000 + i * 33_333 - 5_000 })),
  };
}

export interface VerifyCall {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export function moduleOf(mode: Mode): 'rgb_liveness' | 'color_liveness' {
  return mode === 'color' ? 'color_liveness' : 'rgb_liveness';
}

/** Builds a request from captures (one packet, or an envelope when several are given). */
export function request(captures: CaptureInput[], opts: { batch?: boolean } = {}) {
  const built = captures.length === 1 && !opts.batch ? buildCapture(captures[0]!) : buildBatch(captures);
  return { ...built, ...buildVerifyBody(built.metadata as never, built.files) };
}

export async function postVerify(
  baseUrl: string,
  token: string,
  moduleId: string,
  body: { body: Uint8Array; contentType: string },
  headers: Record<string, string> = {},
): Promise<VerifyCall> {
  const r = await fetch(`${baseUrl}/v1/modules/${moduleId}/verify`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': body.contentType, ...headers },
    body: body.body as unknown as BodyInit,
  });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}
