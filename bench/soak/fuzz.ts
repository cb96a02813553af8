// Fuzzer of malformed verify calls: multipart framing, metadata, PNG bytes and HTTP headers,
// generated from a seed (a failure names the seed and case, so it can be replayed). Each call
// goes over its own raw socket, so a missing answer or a hang is seen as such.
// Guarantees checked:
// - no 5xx (a 503 server_busy is the admission limit, not a fault: the same bytes are sent
//   again, bounded);
// - every call is answered, or (only for the cases that never finish their request, and for
//   header faults below uWS's parser) closed, within the idle limit plus a margin: no hang;
// - nothing charged: units used (CLI) equal the 200s (a mutation can leave a request valid,
//   e.g. a changed digit of a timestamp; those are counted and reported), and the ledger verifies.

import { buildCapture, buildVerifyBody, encodePng, type CaptureInput } from '../../src/client/index.ts';
import { multipart, okFrame, RawConn, smallPng, smallSingle, verifyHead, writeBody } from '../harness/wire.ts';
import { crc32 } from '../../src/images/crc32.ts';
import { Failures, ledgerOk, makeToken, prng, unitsUsed, type ScenarioResult, type ServerHandle } from './lib.ts';

export interface FuzzOptions {
  /** number of malformed calls */
  count: number;
  seed?: number;
  /** calls in flight at once */
  parallel?: number;
  /** the server's idle close (uWS: about 10 s); a call neither answered nor closed by
   * idleLimitMs + hangMarginMs is a hang */
  idleLimitMs?: number;
  hangMarginMs?: number;
  /** how many of the calls leave their body unfinished (each costs about the idle limit) */
  stalls?: number;
  log?: (line: string) => void;
  /** starts the service under test: the soak a real server (bench/soak/run.ts), the test
   * suite the service's app in process (test/service/fuzz.test.ts); malformed input is the
   * app's to answer either way */
  serve: () => Promise<FuzzServer>;
}

/** What the fuzzer needs of a started service: its port, its CLI (tokens, usage, ledger) and a stop. */
export type FuzzServer = Pick<ServerHandle, 'port' | 'cli'> & { stop(): Promise<unknown> };

type Category = 'multipart' | 'metadata' | 'png' | 'headers' | 'stall';

interface Case {
  category: Category;
  what: string;
  /** the bytes written: head and body */
  head: string;
  body: Buffer;
  /** for cases whose head is built from it afterwards */
  contentType?: string;
  /** a close without an answer is acceptable (the request never ends, or uWS refuses the head) */
  closeOk: boolean;
}

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const int = (r: Rand, n: number) => Math.floor(r() * n);

function flip(r: Rand, buf: Buffer, n: number, from = 0): Buffer {
  const out = Buffer.from(buf);
  for (let i = 0; i < n; i++) {
    const at = from + int(r, out.length - from);
    out[at] = out[at]! ^ (1 + int(r, 255));
  }
  return out;
}

function valid(id: string): { body: Buffer; contentType: string; metadata: any; files: Map<string, Uint8Array> } {
  const built = buildCapture(smallSingle(id));
  const b = buildVerifyBody(built.metadata, built.files);
  return { body: Buffer.from(b.body), contentType: b.contentType, metadata: built.metadata, files: built.files };
}

const WEIRD: unknown[] = [null, -1, 0, 1e308, -1e308, 2 ** 53 + 1, '', 'x'.repeat(10_000), '\ud800', '\u0000', true, [], {}, [[[[[]]]]], { a: 1 }, '1', 1.5, NaN];

/** A JSON value mutated at a random path: deleted, retyped, or given an odd value; `did`
 * collects what was done, so a mutation the service accepts can be named in the report. */
function mutateJson(r: Rand, value: any, did: string[] = []): any {
  const copy = structuredClone(value);
  const paths: (string | number)[][] = [];
  const walk = (v: any, p: (string | number)[]) => {
    paths.push(p);
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...p, i]));
    else if (v && typeof v === 'object') for (const k of Object.keys(v)) walk(v[k], [...p, k]);
  };
  walk(copy, []);
  const path = pick(r, paths.slice(1));
  let parent = copy;
  for (const k of path.slice(0, -1)) parent = parent[k];
  const last = path[path.length - 1]!;
  const op = int(r, 4);
  const at = path.join('.');
  const show = (v: unknown) => (JSON.stringify(v) ?? String(v)).slice(0, 20);
  if (op === 0 && !Array.isArray(parent)) {
    delete parent[last];
    did.push(`delete ${at}`);
  } else if (op === 1 && !Array.isArray(parent)) {
    const v = pick(r, WEIRD);
    parent[`${String(last)}_x`] = v;
    did.push(`add ${at}_x=${show(v)}`);
  } else {
    const v = pick(r, WEIRD);
    parent[last] = v;
    did.push(`set ${at}=${show(v)}`);
  }
  return copy;
}

function metadataCase(r: Rand, id: string): Case {
  const v = valid(id);
  const png = v.files.get('f0')!;
  let text: string;
  const kind = int(r, 6);
  let what: string;
  if (kind === 0) {
    text = JSON.stringify(v.metadata).slice(0, int(r, 200));
    what = 'truncated JSON';
  } else if (kind === 1) {
    text = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    what = 'deeply nested JSON';
  } else if (kind === 2) {
    text = `\ufeff${JSON.stringify(v.metadata)}`;
    what = 'JSON with a BOM';
  } else {
    let m = v.metadata;
    const n = 1 + int(r, 3);
    const did: string[] = [];
    for (let i = 0; i < n; i++) m = mutateJson(r, m, did);
    text = JSON.stringify(m);
    what = `JSON mutation: ${did.join(', ')}`;
  }
  const parts = [{ name: 'metadata', data: text }, { name: 'f0', filename: 'f0.png', type: 'image/png', data: Buffer.from(png) }];
  if (int(r, 4) === 0) parts.reverse();
  const b = multipart(parts);
  return { category: 'metadata', what, head: '', body: b.body, contentType: b.contentType, closeOk: false };
}

function pngCase(r: Rand, id: string): Case {
  const good = smallPng();
  let bytes: Buffer;
  let what: string;
  const kind = int(r, 7);
  if (kind === 0) {
    bytes = good.subarray(0, int(r, good.length));
    what = 'truncated PNG';
  } else if (kind === 1) {
    bytes = flip(r, good, 1 + int(r, 4), 8);
    what = 'bytes flipped after the signature';
  } else if (kind === 2) {
    bytes = Buffer.from(good);
    const at = int(r, 8);
    bytes[at] = bytes[at]! ^ (1 + int(r, 255));
    what = 'signature flipped';
  } else if (kind === 3) {
    // IHDR with other dimensions, CRC made right so only the meaning is wrong
    bytes = Buffer.from(good);
    bytes.writeUInt32BE(pick(r, [0, 1, 319, 321, 65535, 2 ** 31 - 1]), 16);
    bytes.writeUInt32BE(crc32(bytes.subarray(12, 29)), 29);
    what = 'IHDR dimensions changed, CRC fixed';
  } else if (kind === 4) {
    bytes = Buffer.concat([good.subarray(0, 33), Buffer.from([0xff, 0xff, 0xff, 0xf0]), Buffer.from('IDAT'), good.subarray(33, 60)]);
    what = 'chunk declaring a huge length';
  } else if (kind === 5) {
    bytes = Buffer.from(Array.from({ length: 1 + int(r, 4000) }, () => int(r, 256)));
    what = 'random bytes';
  } else {
    bytes = Buffer.concat([good.subarray(0, good.length - 12), good.subarray(good.length - 12), Buffer.from('trailing')]);
    what = 'bytes after IEND';
  }
  // metadata that describes these very bytes (right sha256), so the decoder is what refuses them
  const capture: CaptureInput = { capture_id: id, mode: 'rgb_single', frames: [okFrame(0, bytes, {})] };
  capture.frames[0]!.image = { bytes, encoding: 'png' };
  const built = buildCapture(capture);
  const b = buildVerifyBody(built.metadata, built.files);
  return { category: 'png', what, head: '', body: Buffer.from(b.body), contentType: b.contentType, closeOk: false };
}

function multipartCase(r: Rand, id: string): Case {
  const v = valid(id);
  const kind = int(r, 8);
  let body = v.body;
  let contentType = v.contentType;
  let what: string;
  const boundary = /boundary=(.*)$/.exec(v.contentType)![1]!;
  if (kind === 0) {
    body = body.subarray(0, body.lastIndexOf(Buffer.from(`--${boundary}--`)));
    what = 'no closing delimiter';
  } else if (kind === 1) {
    contentType = 'multipart/form-data; boundary=not-the-boundary';
    what = 'boundary not in the body';
  } else if (kind === 2) {
    body = Buffer.from(Array.from({ length: 1 + int(r, 5000) }, () => int(r, 256)));
    what = 'random body';
  } else if (kind === 3) {
    body = Buffer.from(body.toString('latin1').replace(/Content-Disposition: [^\r]*\r\n/, ''), 'latin1');
    what = 'part without Content-Disposition';
  } else if (kind === 4) {
    const at = body.indexOf('\r\n\r\n');
    body = Buffer.concat([body.subarray(0, at), Buffer.from(`\r\nX-Pad: ${'a'.repeat(20_000 + int(r, 100_000))}`), body.subarray(at)]);
    what = 'overlong part header';
  } else if (kind === 5) {
    body = body.subarray(0, int(r, body.length));
    what = 'body cut short (Content-Length matches what is sent)';
  } else if (kind === 6) {
    body = flip(r, body, 1 + int(r, 8));
    what = 'bytes flipped anywhere';
  } else {
    const dup = multipart([{ name: 'metadata', data: JSON.stringify(v.metadata) }, { name: 'f0', filename: 'a.png', data: Buffer.from(v.files.get('f0')!) }, { name: 'f0', filename: 'b.png', data: Buffer.from(v.files.get('f0')!) }]);
    body = dup.body;
    contentType = dup.contentType;
    what = 'part name twice';
  }
  return { category: 'multipart', what, head: '', body, contentType, closeOk: false };
}

function headersCase(r: Rand, id: string, token: string): Case {
  const v = valid(id);
  const kind = int(r, 9);
  const base = { token, contentType: v.contentType as string | null, contentLength: v.body.length as number | string | null, extra: {} as Record<string, string> };
  let what: string;
  let closeOk = false;
  let head: string | undefined;
  if (kind === 0) {
    base.contentType = pick(r, [null, 'text/plain', 'multipart/form-data', 'multipart/form-data; boundary=', 'multipart/mixed; boundary=x', 'application/json', `multipart/form-data; boundary=${'b'.repeat(300)}`]);
    what = `Content-Type ${base.contentType}`;
  } else if (kind === 1) {
    base.extra['Idempotency-Key'] = pick(r, ['', ' ', 'has space', 'k'.repeat(201), 'tab\tkey', '\u007f']);
    what = 'bad Idempotency-Key';
  } else if (kind === 2) {
    what = 'bad Authorization';
    head = verifyHead({ ...base, token: pick(r, ['', 'lvk_', `${token}x`, 'lvk_' + 'A'.repeat(43), `${token} ${token}`]) });
    if (int(r, 2) === 0) head = head.replace(/Authorization: Bearer /, pick(r, ['Authorization: Basic ', 'Authorization: bearer', 'Authorization:  Bearer  ', 'X-Auth: ']));
  } else if (kind === 3) {
    base.contentLength = v.body.length - 1 - int(r, Math.min(200, v.body.length - 1));
    what = 'Content-Length shorter than the body (the rest reads as a next request)';
    closeOk = true;
  } else if (kind === 4) {
    base.contentLength = pick(r, [32 * 1024 * 1024 + 1, 100 * 1024 * 1024, 999_999_999, 1_000_000_000, 2 ** 31 - 1]);
    what = `Content-Length ${base.contentLength} (over the limit)`;
    // uWS 20.30's parser drops a request whose Content-Length has 10 digits or more (>= 10^9)
    // before any handler runs: closed without an answer (docs/endpoints.md, known limitations of the HTTP parser)
    closeOk = base.contentLength >= 1_000_000_000;
  } else if (kind === 5) {
    head = verifyHead({ ...base, contentLength: null, chunked: true });
    const size = v.body.length.toString(16);
    const bad = pick(r, ['zz', '-1', `${size};ext=1`, 'ffffffffffffffff', '']);
    what = `chunked with chunk size ${JSON.stringify(bad)}`;
    closeOk = true;
    return { category: 'headers', what, head, body: Buffer.concat([Buffer.from(`${bad}\r\n`), v.body, Buffer.from('\r\n0\r\n\r\n')]), closeOk };
  } else if (kind === 6) {
    base.extra['X-Forwarded-For'] = pick(r, ['not-an-ip', '1.2.3.4, , ,', '::ffff:999.1.1.1', 'x'.repeat(5000)]);
    what = 'odd X-Forwarded-For';
  } else if (kind === 7) {
    head = verifyHead(base).replace('\r\n\r\n', `\r\n${pick(r, ['X-Bad\x01: 1', 'NoColon', ' Folded: header', `X-Long: ${'z'.repeat(60_000)}`])}\r\n\r\n`);
    what = 'malformed header line';
    closeOk = true;
  } else {
    head = verifyHead(base).replace(/^POST \/v1\/modules\/rgb_liveness\/verify/, pick(r, ['POST /v1/modules/../verify', 'POST /v1/modules/%00/verify', 'POST /v1/modules/rgb_liveness/verify?x=%zz', 'POST /v1/modules//verify', `POST /v1/modules/${'m'.repeat(3000)}/verify`]));
    what = 'odd request target';
  }
  return { category: 'headers', what, head: head ?? verifyHead(base), body: v.body, closeOk };
}

function stallCase(r: Rand, id: string, token: string): Case {
  const v = valid(id);
  const sent = int(r, v.body.length);
  return { category: 'stall', what: `declares ${v.body.length} bytes, sends ${sent} and stalls`, head: verifyHead({ token, contentType: v.contentType, contentLength: v.body.length }), body: v.body.subarray(0, sent), closeOk: true };
}

interface Result {
  outcome: 'answered' | 'closed' | 'hung';
  status?: number;
  code?: string;
  ms: number;
}

async function run(server: FuzzServer, c: Case, waitMs: number): Promise<Result> {
  const conn = new RawConn(server.port);
  const started = Date.now();
  try {
    await conn.connected;
    await conn.write(c.head);
    await writeBody(conn, c.body, 64 * 1024);
    try {
      const res = await conn.response({ answerWaitMs: waitMs });
      return { outcome: 'answered', status: res.status, code: res.json?.error?.code, ms: Date.now() - started };
    } catch {
      return { outcome: conn.isClosed ? 'closed' : 'hung', ms: Date.now() - started };
    }
  } catch {
    return { outcome: conn.isClosed ? 'closed' : 'hung', ms: Date.now() - started };
  } finally {
    conn.close();
  }
}

export async function runFuzz(opts: FuzzOptions): Promise<ScenarioResult> {
  const log = opts.log ?? (() => {});
  const seed = opts.seed ?? 1;
  const r = prng(seed);
  const failures = new Failures();
  const waitMs = (opts.idleLimitMs ?? 10_000) + (opts.hangMarginMs ?? 10_000);
  const server = await opts.serve();
  try {
    const { id: tokenId, token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
    const usedBefore = await unitsUsed(server, tokenId);
    const cases: Case[] = [];
    const stalls = opts.stalls ?? 2;
    for (let i = 0; i < opts.count; i++) {
      const id = `fuzz-${seed}-${i}`;
      const which = i < stalls ? 4 : int(r, 4);
      let c: Case;
      if (which === 0) c = multipartCase(r, id);
      else if (which === 1) c = metadataCase(r, id);
      else if (which === 2) c = pngCase(r, id);
      else if (which === 3) c = headersCase(r, id, token);
      else c = stallCase(r, id, token);
      if (!c.head) c.head = verifyHead({ token, contentType: c.contentType!, contentLength: c.body.length });
      cases.push(c);
    }
    const byCategory: Record<string, Record<string, number>> = {};
    let oks = 0;
    /** mutations that left the request valid (answered 200), by kind */
    const accepted: Record<string, number> = {};
    let busyRetries = 0;
    let maxMs = 0;
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const i = next++;
        const c = cases[i]!;
        let res = await run(server, c, waitMs);
        // 503 server_busy is admission, not a fault of this input: the same bytes again, bounded
        for (let n = 0; n < 100 && res.status === 503 && res.code === 'server_busy'; n++) {
          busyRetries++;
          await new Promise((ok) => setTimeout(ok, 20));
          res = await run(server, c, waitMs);
        }
        maxMs = Math.max(maxMs, res.ms);
        const key = res.outcome === 'answered' ? String(res.status) : res.outcome;
        const cat = (byCategory[c.category] ??= {});
        cat[key] = (cat[key] ?? 0) + 1;
        const where = `case ${i} (seed ${seed}, ${c.category}: ${c.what})`;
        if (res.outcome === 'hung') failures.add(`${where}: neither answered nor closed within ${waitMs} ms`);
        else if (res.outcome === 'closed' && !c.closeOk) failures.add(`${where}: closed without an answer`);
        else if (res.status !== undefined && res.status >= 500) failures.add(`${where}: ${res.status} ${res.code ?? ''}`);
        if (res.status === 200) {
          oks++;
          const k = `${c.category}: ${c.what}`;
          accepted[k] = (accepted[k] ?? 0) + 1;
        }
        if ((i + 1) % 500 === 0) log(`${i + 1}/${cases.length} calls`);
      }
    };
    const started = Date.now();
    await Promise.all(Array.from({ length: opts.parallel ?? 4 }, worker));
    const seconds = (Date.now() - started) / 1000;
    const used = (await unitsUsed(server, tokenId)) - usedBefore;
    const ledger = await ledgerOk(server);
    failures.check(used === oks, `units used ${used} != calls answered 200 ${oks}: a refused call was charged`);
    failures.check(ledger.ok, `ledger verify failed: ${ledger.detail}`);
    return {
      name: 'fuzz',
      figures: { calls: cases.length, seconds: Math.round(seconds), answered_200: oks, units_used: used, busy_retries: busyRetries, slowest_ms: maxMs, ledger_ok: ledger.ok, outcomes: JSON.stringify(byCategory), accepted_as_valid: JSON.stringify(accepted) },
      failures: failures.done(),
    };
  } finally {
    await server.stop();
  }
}
