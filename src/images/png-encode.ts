// Small PNG encoder: what a client sends (8-bit RGB, colour type 2), plus the variants the
// decoder must refuse (alpha, grey, palette, 16-bit, interlace flag, bad CRC, odd chunk
// layouts), so tests build their inputs from one place instead of hand-made byte blobs.

import * as zlib from 'node:zlib';
import { crc32 } from './crc32.ts';

export type PngFilter = 0 | 1 | 2 | 3 | 4;

export interface PngChunk {
  type: string;
  data?: Uint8Array;
  /** where it goes; default 'beforeIdat' */
  at?: 'beforeIdat' | 'betweenIdat' | 'afterIdat' | 'afterIend';
}

export interface PngEncodeOptions {
  /** 2 (RGB, default), 6 (RGBA, alpha 255), 0 (grey from the red channel), 3 (palette). */
  colorType?: 0 | 2 | 3 | 6;
  bitDepth?: 8 | 16;
  /** one filter for every row, 'cycle' (row y uses y mod 5) or 'adaptive' (default: the
   * usual minimum-sum-of-absolute-differences choice per row) */
  filter?: PngFilter | 'cycle' | 'adaptive';
  /** writes the interlace flag only; the data stays in progressive order */
  interlace?: number;
  /** split the zlib stream over this many IDAT chunks (default 1) */
  idatChunks?: number;
  level?: number;
  extraChunks?: PngChunk[];
  /** chunk type whose stored CRC is flipped */
  corruptCrc?: string;
  /** rewrite the filtered scanlines before compression (wrong lengths, bad filter bytes) */
  transformRaw?: (raw: Uint8Array) => Uint8Array;
  /** rewrite the zlib stream (trailing bytes, truncation) */
  transformZlib?: (z: Uint8Array) => Uint8Array;
  /** bytes appended after IEND */
  trailing?: Uint8Array;
}

export function encodePng(rgb: Uint8Array, width = 320, height = 320, options: PngEncodeOptions = {}): Buffer {
  if (rgb.length !== width * height * 3) {
    throw new RangeError(`encodePng: ${rgb.length} bytes is not ${width}x${height} RGB`);
  }
  const colorType = options.colorType ?? 2;
  const bitDepth = options.bitDepth ?? 8;
  const { samples, channels, palette } = toSamples(rgb, width * height, colorType);
  const bytesPerSample = bitDepth / 8;
  const bpp = channels * bytesPerSample;
  const stride = width * bpp;

  const rows = new Uint8Array(height * stride);
  for (let p = 0, o = 0; p < samples.length; p++) {
    if (bytesPerSample === 2) {
      rows[o++] = samples[p];
      rows[o++] = samples[p]; // v * 257: the exact 16-bit equivalent of the 8-bit value
    } else {
      rows[o++] = samples[p];
    }
  }

  let raw: Uint8Array = filterRows(rows, height, stride, bpp, options.filter ?? 'adaptive');
  if (options.transformRaw) raw = options.transformRaw(raw);
  let z: Uint8Array = zlib.deflateSync(raw, { level: options.level ?? 6 });
  if (options.transformZlib) z = options.transformZlib(z);

  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = bitDepth;
  ihdr[9] = colorType;
  ihdr[10] = 0;
  ihdr[11] = 0;
  ihdr[12] = options.interlace ?? 0;

  const extras = options.extraChunks ?? [];
  const place = (at: NonNullable<PngChunk['at']>) =>
    extras.filter((c) => (c.at ?? 'beforeIdat') === at).map((c) => chunk(c.type, c.data ?? new Uint8Array(0), options));

  const parts: Uint8Array[] = [Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr, options)];
  if (palette) parts.push(chunk('PLTE', palette, options));
  parts.push(...place('beforeIdat'));
  const n = Math.max(1, options.idatChunks ?? 1);
  const size = Math.ceil(z.length / n);
  for (let i = 0; i < n; i++) {
    parts.push(chunk('IDAT', z.subarray(i * size, Math.min(z.length, (i + 1) * size)), options));
    if (i === 0) parts.push(...place('betweenIdat'));
  }
  parts.push(...place('afterIdat'));
  parts.push(chunk('IEND', new Uint8Array(0), options));
  parts.push(...place('afterIend'));
  if (options.trailing) parts.push(options.trailing);
  return Buffer.concat(parts);
}

function chunk(type: string, data: Uint8Array, options: PngEncodeOptions): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  out.set(data, 8);
  let crc = crc32(out.subarray(4, 8 + data.length));
  if (options.corruptCrc === type) crc = (crc ^ 1) >>> 0;
  out.writeUInt32BE(crc, 8 + data.length);
  return out;
}

function toSamples(rgb: Uint8Array, pixels: number, colorType: number): { samples: Uint8Array; channels: number; palette?: Uint8Array } {
  switch (colorType) {
    case 2:
      return { samples: rgb, channels: 3 };
    case 6: {
      const s = new Uint8Array(pixels * 4);
      for (let p = 0; p < pixels; p++) {
        s[p * 4] = rgb[p * 3];
        s[p * 4 + 1] = rgb[p * 3 + 1];
        s[p * 4 + 2] = rgb[p * 3 + 2];
        s[p * 4 + 3] = 255;
      }
      return { samples: s, channels: 4 };
    }
    case 0: {
      const s = new Uint8Array(pixels);
      for (let p = 0; p < pixels; p++) s[p] = rgb[p * 3];
      return { samples: s, channels: 1 };
    }
    case 3: {
      const index = new Map<number, number>();
      const s = new Uint8Array(pixels);
      for (let p = 0; p < pixels; p++) {
        const key = (rgb[p * 3] << 16) | (rgb[p * 3 + 1] << 8) | rgb[p * 3 + 2];
        let i = index.get(key);
        if (i === undefined) {
          if (index.size === 256) throw new RangeError('encodePng: more than 256 colours for a palette image');
          i = index.size;
          index.set(key, i);
        }
        s[p] = i;
      }
      const palette = new Uint8Array(index.size * 3);
      for (const [key, i] of index) {
        palette[i * 3] = key >> 16;
        palette[i * 3 + 1] = (key >> 8) & 255;
        palette[i * 3 + 2] = key & 255;
      }
      return { samples: s, channels: 1, palette };
    }
    default:
      throw new RangeError(`encodePng: colour type ${colorType} not supported`);
  }
}

function filterRows(rows: Uint8Array, height: number, stride: number, bpp: number, mode: PngEncodeOptions['filter']): Uint8Array {
  const raw = new Uint8Array(height * (stride + 1));
  const candidate = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const line = rows.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? rows.subarray((y - 1) * stride, y * stride) : null;
    const dst = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    let chosen: PngFilter;
    if (mode === 'adaptive') {
      chosen = 0;
      let best = Infinity;
      for (const f of [0, 1, 2, 3, 4] as PngFilter[]) {
        applyFilter(f, line, prev, bpp, candidate);
        let sum = 0;
        for (let i = 0; i < stride; i++) sum += candidate[i] < 128 ? candidate[i] : 256 - candidate[i];
        if (sum < best) {
          best = sum;
          chosen = f;
        }
      }
    } else {
      chosen = mode === 'cycle' ? ((y % 5) as PngFilter) : (mode ?? 0);
    }
    applyFilter(chosen, line, prev, bpp, dst);
    raw[y * (stride + 1)] = chosen;
  }
  return raw;
}

function applyFilter(f: PngFilter, line: Uint8Array, prev: Uint8Array | null, bpp: number, out: Uint8Array): void {
  for (let i = 0; i < line.length; i++) {
    const a = i >= bpp ? line[i - bpp] : 0;
    const b = prev ? prev[i] : 0;
    const c = prev && i >= bpp ? prev[i - bpp] : 0;
    let pred: number;
    switch (f) {
      case 0: pred = 0; break;
      case 1: pred = a; break;
      case 2: pred = b; break;
      case 3: pred = (a + b) >> 1; break;
      default: {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
    }
    out[i] = (line[i] - pred) & 255;
  }
}
