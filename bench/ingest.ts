// Ingest cost of a verify call: multipart parse + per-part SHA-256 (with the metadata parsed the
// moment its part ends, as the route does) and then prepareRequest (metadata part rules, packet
// rules, parts against references, hashes, every image decoded), in-process, on the body fed in
// 64 KiB chunks the way uWS delivers it. Two bodies: a 20-frame PNG sequence and a 32-capture
// batch of single PNG crops. Then the same bodies end to end against a started server, one
// request in flight, so the ingest share of a request's time is ingest ms / end-to-end ms.
//
//   node --import tsx bench/ingest.ts [--quick]

import { pathToFileURL } from 'node:url';
import { MultipartParser, parseMultipartBoundary } from '../src/http/multipart/index.ts';
import { LIMITS } from '../src/http/routes/verify.ts';
import type { ModuleId } from '../src/contract/index.ts';
import { earlyMetadata, prepareRequest } from '../src/verify/index.ts';
import { postVerify, request, sequence, single } from './harness/captures.ts';
import { makeToken, startServer } from './harness/server.ts';

const CHUNK = 64 * 1024;

export interface IngestFigures {
  name: string;
  module: ModuleId;
  captures: number;
  images: number;
  body_bytes: number;
  /** median ms of parse + hash (metadata parsed at its part end) */
  parse_hash_ms: number;
  /** median ms of prepareRequest: rules, references, hashes compared, images decoded */
  prepare_ms: number;
  /** median ms of the whole ingest of one request (the two above in one run) */
  ingest_ms: number;
  /** body bytes / ingest time, in 10^6 bytes per second */
  ingest_MBps: number;
  parse_hash_MBps: number;
  /** median ms of the same request end to end over HTTP (one in flight; inference included) */
  e2e_ms: number;
  /** ingest_ms / e2e_ms */
  ingest_share_of_e2e: number;
}

interface Body {
  name: string;
  module: ModuleId;
  captures: number;
  body: Buffer;
  contentType: string;
  images: number;
}

function bodies(): Body[] {
  const seq = request([sequence(20)]);
  const batch = request(Array.from({ length: 32 }, (_, i) => single({ seed: i + 1 })), { batch: true });
  return [
    { name: 'rgb_sequence 20 png', module: 'rgb_liveness', captures: 1, body: seq.body, contentType: seq.contentType, images: seq.files.size },
    { name: 'batch 32 rgb_single png', module: 'rgb_liveness', captures: 32, body: batch.body, contentType: batch.contentType, images: batch.files.size },
  ];
}

/** One request's ingest as the route does it; returns the two phase times in ms. */
function ingestOnce(b: Body, chunks: Buffer[], boundary: string): { parse: number; prepare: number } {
  const t0 = performance.now();
  const metadata = earlyMetadata(b.module);
  const parser = new MultipartParser(boundary, LIMITS, { onPartEnd: metadata.onPartEnd });
  // the route copies each uWS chunk before handing it over (uWS detaches it)
  for (const c of chunks) parser.write(Buffer.from(c));
  const parts = parser.end();
  const t1 = performance.now();
  const prepared = prepareRequest(b.module, parts, metadata.parsed());
  const t2 = performance.now();
  if (prepared.captures.length !== b.captures) throw new Error('bench: prepareRequest returned the wrong captures');
  return { parse: t1 - t0, prepare: t2 - t1 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

function measureIngest(b: Body, ms: number): { parse: number; prepare: number; total: number } {
  const boundary = parseMultipartBoundary(b.contentType);
  if (boundary === null) throw new Error('bench: no boundary');
  const chunks: Buffer[] = [];
  for (let at = 0; at < b.body.length; at += CHUNK) chunks.push(Buffer.from(b.body.subarray(at, at + CHUNK)));
  for (let i = 0; i < 3; i++) ingestOnce(b, chunks, boundary);
  const parse: number[] = [];
  const prepare: number[] = [];
  const total: number[] = [];
  const stop = performance.now() + ms;
  while (performance.now() < stop || total.length < 5) {
    const r = ingestOnce(b, chunks, boundary);
    parse.push(r.parse);
    prepare.push(r.prepare);
    total.push(r.parse + r.prepare);
  }
  return { parse: median(parse), prepare: median(prepare), total: median(total) };
}

export async function benchIngest(opts: { quick: boolean }): Promise<{ chunk_bytes: number; e2e_workers: number; scenarios: IngestFigures[] }> {
  const list = bodies();
  const inProcess = list.map((b) => measureIngest(b, opts.quick ? 600 : 3000));

  const workers = 2;
  const server = await startServer({ ready: true, env: { WORKERS: String(workers), INFERENCE_THREADS: '1', WARMUP_RUNS: '5' }, timeoutMs: 180_000 });
  const e2e: number[] = [];
  try {
    const { token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
    for (const b of list) {
      const send = async () => {
        const t0 = performance.now();
        const r = await postVerify(server.baseUrl, token, b.module, b);
        if (r.status !== 200) throw new Error(`bench: ${b.name} answered ${r.status}: ${r.text.slice(0, 200)}`);
        return performance.now() - t0;
      };
      for (let i = 0; i < 3; i++) await send();
      const times: number[] = [];
      for (let i = 0; i < (opts.quick ? 5 : 20); i++) times.push(await send());
      e2e.push(median(times));
    }
  } finally {
    await server.stop();
  }

  const scenarios = list.map((b, i): IngestFigures => {
    const m = inProcess[i]!;
    return {
      name: b.name,
      module: b.module,
      captures: b.captures,
      images: b.images,
      body_bytes: b.body.length,
      parse_hash_ms: round(m.parse),
      prepare_ms: round(m.prepare),
      ingest_ms: round(m.total),
      ingest_MBps: round(b.body.length / 1e6 / (m.total / 1e3)),
      parse_hash_MBps: round(b.body.length / 1e6 / (m.parse / 1e3)),
      e2e_ms: round(e2e[i]!),
      ingest_share_of_e2e: round(m.total / e2e[i]!, 3),
    };
  });
  return { chunk_bytes: CHUNK, e2e_workers: workers, scenarios };
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await benchIngest({ quick: process.argv.includes('--quick') });
  const pad = (s: string | number, n: number) => String(s).padStart(n);
  console.log(`ingest (parse + hash + decode, in-process, ${r.chunk_bytes / 1024} KiB chunks) vs end to end (${r.e2e_workers} API workers, 1 in flight)`);
  console.log(`${'scenario'.padEnd(26)}${pad('body MB', 9)}${pad('parse ms', 10)}${pad('prep ms', 9)}${pad('ingest ms', 11)}${pad('MB/s', 8)}${pad('e2e ms', 9)}${pad('share', 8)}`);
  for (const s of r.scenarios) {
    console.log(`${s.name.padEnd(26)}${pad((s.body_bytes / 1e6).toFixed(2), 9)}${pad(s.parse_hash_ms.toFixed(2), 10)}${pad(s.prepare_ms.toFixed(2), 9)}${pad(s.ingest_ms.toFixed(2), 11)}${pad(s.ingest_MBps.toFixed(0), 8)}${pad(s.e2e_ms.toFixed(1), 9)}${pad(`${(s.ingest_share_of_e2e * 100).toFixed(1)} %`, 8)}`);
  }
  console.log(JSON.stringify(r, null, 2));
  process.exit(0);
}
