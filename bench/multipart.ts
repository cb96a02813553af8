// Parse + hash throughput of the streaming multipart parser on the verify endpoint's two
// typical bodies, fed in 64 KiB chunks as uWS delivers them. The SHA-256-only figure over the
// same bytes is the floor the parser cannot beat, so the gap between the two is its own cost.
//
//   node --import tsx bench/multipart.ts

import { createHash, randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { MultipartParser, parseMultipartBoundary } from '../src/http/multipart/index.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const CHUNK = 64 * KiB;
const LIMITS = { maxPartBytes: MiB, maxParts: 64, maxHeaderBytes: 8 * KiB };

export interface MultipartBenchResult {
  body: string;
  bytes: number;
  parts: number;
  /** Parse + per-part SHA-256, median over the runs, in 10^6 bytes per second. */
  parseHashMBps: number;
  /** The same plus concatenating every part with data(), as the hand-off to inference does. */
  parseHashDataMBps: number;
  /** SHA-256 over the same chunks without parsing. */
  hashOnlyMBps: number;
}

async function buildBody(images: number, imageBytes: number): Promise<{ boundary: string; chunks: Buffer[]; bytes: number }> {
  const fd = new FormData();
  fd.append('metadata', JSON.stringify({ captures: Array.from({ length: images }, (_, i) => ({ capture_id: `c${i}` })) }));
  for (let i = 0; i < images; i++) fd.append(`frame${i}.png`, new Blob([randomBytes(imageBytes)], { type: 'image/png' }), `frame${i}.png`);
  const res = new Response(fd);
  const body = Buffer.from(await res.arrayBuffer());
  const boundary = parseMultipartBoundary(res.headers.get('content-type') ?? undefined);
  if (boundary === null) throw new Error('FormData produced no boundary');
  const chunks: Buffer[] = [];
  for (let at = 0; at < body.length; at += CHUNK) chunks.push(Buffer.from(body.subarray(at, at + CHUNK)));
  return { boundary, chunks, bytes: body.length };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Runs `fn` repeatedly for about `ms` after a warm-up; returns the median MB/s. */
function measure(bytes: number, ms: number, fn: () => void): number {
  for (let i = 0; i < 5; i++) fn();
  const rates: number[] = [];
  const stop = performance.now() + ms;
  while (performance.now() < stop || rates.length < 5) {
    const t0 = performance.now();
    fn();
    rates.push(bytes / 1e6 / ((performance.now() - t0) / 1e3));
  }
  return median(rates);
}

export async function benchMultipart(opts: { ms?: number } = {}): Promise<MultipartBenchResult[]> {
  const ms = opts.ms ?? 1500;
  const cases = [
    { body: '20-frame sequence, 20 x 200 KiB + metadata', images: 20 },
    { body: '32-capture batch, 32 x 200 KiB + metadata', images: 32 },
  ];
  const results: MultipartBenchResult[] = [];
  for (const c of cases) {
    const { boundary, chunks, bytes } = await buildBody(c.images, 200 * KiB);
    const parse = (withData: boolean): number => {
      const p = new MultipartParser(boundary, LIMITS);
      for (const ch of chunks) p.write(ch);
      const parts = p.end();
      if (withData) for (const part of parts) part.data();
      return parts.length;
    };
    const parts = parse(false);
    if (parts !== c.images + 1) throw new Error(`expected ${c.images + 1} parts, parsed ${parts}`);
    results.push({
      body: c.body,
      bytes,
      parts,
      parseHashMBps: measure(bytes, ms, () => parse(false)),
      parseHashDataMBps: measure(bytes, ms, () => parse(true)),
      hashOnlyMBps: measure(bytes, ms, () => {
        const h = createHash('sha256');
        for (const ch of chunks) h.update(ch);
        h.digest();
      }),
    });
  }
  return results;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const results = await benchMultipart();
  for (const r of results) {
    console.log(
      `${r.body}: ${(r.bytes / MiB).toFixed(2)} MiB, ${r.parts} parts, 64 KiB chunks | ` +
        `parse+hash ${r.parseHashMBps.toFixed(0)} MB/s, +data() ${r.parseHashDataMBps.toFixed(0)} MB/s, ` +
        `sha256 alone ${r.hashOnlyMBps.toFixed(0)} MB/s`,
    );
  }
}
