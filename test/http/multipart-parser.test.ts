import t from 'tap';
import { createHash } from 'node:crypto';
import {
  MultipartError,
  MultipartParser,
  parseMultipartBoundary,
  type MultipartLimits,
  type PartHeaders,
  type ReceivedPart,
} from '../../src/http/multipart/index.ts';

const MiB = 1024 * 1024;
const LIMITS: MultipartLimits = { maxPartBytes: MiB, maxParts: 64, maxHeaderBytes: 8 * 1024 };

interface Spec {
  name: string;
  filename?: string;
  contentType?: string;
  data: Buffer;
}

function build(boundary: string, parts: Spec[], opts: { preamble?: string; epilogue?: string } = {}): Buffer {
  const out: Buffer[] = [];
  if (opts.preamble !== undefined) out.push(Buffer.from(`${opts.preamble}\r\n`));
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.contentType !== undefined) head += `Content-Type: ${p.contentType}\r\n`;
    out.push(Buffer.from(`${head}\r\n`), p.data, Buffer.from('\r\n'));
  }
  out.push(Buffer.from(`--${boundary}--`));
  if (opts.epilogue !== undefined) out.push(Buffer.from(`\r\n${opts.epilogue}`));
  return Buffer.concat(out);
}

/** Runs the parser over `body` cut at the given offsets; copies each chunk as the server does. */
/** Writes the body cut at `cuts`, as uWS hands it over: each chunk is valid only during the
 * write (uWS detaches it afterwards), so it is overwritten once write() returns; a parser that
 * kept a view into it would return garbage. */
function parseAt(boundary: string, body: Buffer, cuts: number[], limits = LIMITS): ReceivedPart[] {
  const p = new MultipartParser(boundary, limits);
  let last = 0;
  for (const c of [...cuts, body.length]) {
    const chunk = Buffer.from(body.subarray(last, c));
    try {
      p.write(chunk);
    } finally {
      chunk.fill(0xee);
    }
    last = c;
  }
  return p.end();
}

function parseInChunks(boundary: string, body: Buffer, size: number, limits = LIMITS): ReceivedPart[] {
  const cuts: number[] = [];
  for (let i = size; i < body.length; i += size) cuts.push(i);
  return parseAt(boundary, body, cuts, limits);
}

function summary(parts: ReceivedPart[]) {
  return parts.map((p) => ({
    name: p.name,
    filename: p.filename,
    contentType: p.contentType,
    size: p.size,
    sha256: p.sha256,
    data: p.data().toString('hex'),
  }));
}

function expected(parts: Spec[]) {
  return parts.map((p) => ({
    name: p.name,
    filename: p.filename ?? null,
    contentType: p.contentType ?? null,
    size: p.data.length,
    sha256: createHash('sha256').update(p.data).digest('hex'),
    data: p.data.toString('hex'),
  }));
}

/** Deterministic bytes so a failure reproduces. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

function catchError(fn: () => unknown): MultipartError {
  try {
    fn();
  } catch (err) {
    if (err instanceof MultipartError) return err;
    throw err;
  }
  throw new Error('expected a MultipartError');
}

const B = 'XyZ-boundary';
// Data that walks right up to the delimiter without being one: every proper prefix of
// CRLF--boundary, the boundary without its CRLF, lone CRs and LFs, and a trailing CR.
const TRICKY = Buffer.concat([
  Buffer.from('\r'),
  Buffer.from(`\r\n--${B.slice(0, -1)}`),
  Buffer.from('\r\n-\r\n--\r\n--X'),
  Buffer.from(`--${B}\r\n`),
  Buffer.from(`\n--${B}--`),
  Buffer.from([0, 255, 13, 13, 10, 13]),
  Buffer.from(`\r\n--${B.slice(0, 5)}`),
  Buffer.from('\r'),
]);
const SMALL_PARTS: Spec[] = [
  { name: 'metadata', data: Buffer.from('{"protocol_version":1}') },
  { name: 'frames/0.png', filename: '0.png', contentType: 'image/png', data: TRICKY },
  { name: 'empty', filename: 'e.bin', contentType: 'application/octet-stream', data: Buffer.alloc(0) },
  { name: 'tail', data: Buffer.from('\r\n\r\n') },
];

t.test('hand-built body round-trips whole, at every split offset and byte by byte', async (t) => {
  const body = build(B, SMALL_PARTS, { preamble: `ignored preamble\r\nwith --${B}x inside`, epilogue: 'ignored\r\n--junk' });
  const want = expected(SMALL_PARTS);
  t.same(summary(parseAt(B, body, [])), want, 'one write');
  let mismatches = 0;
  for (let i = 0; i <= body.length; i++) {
    const got = summary(parseAt(B, body, [i]));
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      mismatches++;
      t.same(got, want, `split at ${i}`);
    }
  }
  t.equal(mismatches, 0, `all ${body.length + 1} two-way splits agree`);
  t.same(summary(parseInChunks(B, body, 1)), want, '1-byte chunks');
  t.same(summary(parseInChunks(B, body, 7)), want, '7-byte chunks');
});

t.test('every pair of split offsets over a body dense with near-delimiters', async (t) => {
  const parts: Spec[] = [
    { name: 'a', data: Buffer.from(`\r\n--${B.slice(0, 3)}\r`) },
    { name: 'b', filename: 'b', data: Buffer.from(`\r\r\n-\r\n--${B.slice(0, -1)}`) },
  ];
  const body = build(B, parts);
  const want = JSON.stringify(expected(parts));
  let bad = 0;
  for (let i = 0; i <= body.length; i++) {
    for (let j = i; j <= body.length; j++) {
      if (JSON.stringify(summary(parseAt(B, body, [i, j]))) !== want) bad++;
    }
  }
  t.equal(bad, 0, `all pairs over a ${body.length}-byte body agree`);
});

t.test('randomised bodies in random chunkings match what was encoded', async (t) => {
  const rnd = prng(0x5eed);
  const frags = [`\r\n--${B.slice(0, 4)}`, `\r\n--${B.slice(0, -1)}`, '\r', '\n', '\r\n', `--${B}`, '\r\n-'];
  for (let round = 0; round < 60; round++) {
    const parts: Spec[] = [];
    const n = 1 + Math.floor(rnd() * 5);
    for (let k = 0; k < n; k++) {
      const pieces: Buffer[] = [];
      const m = Math.floor(rnd() * 12);
      for (let q = 0; q < m; q++) {
        if (rnd() < 0.5) pieces.push(Buffer.from(frags[Math.floor(rnd() * frags.length)]!));
        else pieces.push(Buffer.from(Array.from({ length: Math.floor(rnd() * 40) }, () => Math.floor(rnd() * 256))));
      }
      const data = Buffer.concat(pieces);
      // A sender picks a boundary absent from its data; one that collides would be a different
      // (valid) body, so such draws are skipped rather than expected to round-trip.
      if (data.includes(`\r\n--${B}`) || data.subarray(0, B.length + 2).equals(Buffer.from(`--${B}`))) continue;
      parts.push({ name: `p${k}`, filename: rnd() < 0.5 ? `f${k}.bin` : undefined, data });
    }
    const body = build(B, parts, rnd() < 0.5 ? { preamble: 'pre', epilogue: 'post' } : {});
    const cuts: number[] = [];
    for (let at = 0; at < body.length; at += 1 + Math.floor(rnd() * 30)) cuts.push(at);
    t.same(summary(parseAt(B, body, cuts)), expected(parts), `round ${round}`);
  }
});

t.test('bodies encoded by Node fetch FormData parse identically at every split', async (t) => {
  const rnd = prng(7);
  const png = Buffer.from(Array.from({ length: 700 }, () => Math.floor(rnd() * 256)));
  png.write('\r\n--\r\n-', 100, 'latin1');
  const metadata = JSON.stringify({ captures: [{ capture_id: 'c\u00e9-1', frames: [] }] });
  const fd = new FormData();
  fd.append('metadata', metadata);
  fd.append('cap0/frame 1.png', new Blob([png], { type: 'image/png' }), 'frame 1.png');
  fd.append('raw', new Blob([Buffer.from('\r\n')]), 'r\u00e9sum\u00e9.rgb');
  const res = new Response(fd);
  const body = Buffer.from(await res.arrayBuffer());
  const boundary = parseMultipartBoundary(res.headers.get('content-type') ?? undefined);
  t.ok(boundary, 'fetch Content-Type yields a boundary');
  const want = [
    { name: 'metadata', filename: null, contentType: null, data: Buffer.from(metadata) },
    { name: 'cap0/frame 1.png', filename: 'frame 1.png', contentType: 'image/png', data: png },
    { name: 'raw', filename: 'r\u00e9sum\u00e9.rgb', contentType: 'application/octet-stream', data: Buffer.from('\r\n') },
  ].map((w) => ({
    name: w.name,
    filename: w.filename,
    contentType: w.contentType,
    size: w.data.length,
    sha256: createHash('sha256').update(w.data).digest('hex'),
    data: w.data.toString('hex'),
  }));
  t.same(summary(parseAt(boundary!, body, [])), want);
  let bad = 0;
  for (let i = 0; i <= body.length; i++) {
    if (JSON.stringify(summary(parseAt(boundary!, body, [i]))) !== JSON.stringify(want)) bad++;
  }
  t.equal(bad, 0, `all ${body.length + 1} splits agree`);
  t.same(summary(parseInChunks(boundary!, body, 1)), want, '1-byte chunks');
});

t.test('image-sized FormData parts in 64 KiB chunks', async (t) => {
  const fd = new FormData();
  const imgs: Buffer[] = [];
  for (let i = 0; i < 5; i++) {
    const img = Buffer.alloc(200 * 1024 + i);
    for (let j = 0; j < img.length; j++) img[j] = (j * 31 + i * 7) & 0xff;
    imgs.push(img);
    fd.append(`f${i}`, new Blob([img]), `f${i}.png`);
  }
  const res = new Response(fd);
  const body = Buffer.from(await res.arrayBuffer());
  const parts = parseInChunks(parseMultipartBoundary(res.headers.get('content-type') ?? undefined)!, body, 64 * 1024);
  t.equal(parts.length, 5);
  parts.forEach((p, i) => {
    t.equal(p.size, imgs[i]!.length);
    t.equal(p.sha256, createHash('sha256').update(imgs[i]!).digest('hex'));
    t.ok(p.data().equals(imgs[i]!), `part ${i} bytes`);
  });
});

t.test('a trickled upload ends as one buffer of exactly its bytes, whatever the write sizes', async (t) => {
  const rnd = prng(99);
  const data = Buffer.from(Array.from({ length: 100_000 }, () => Math.floor(rnd() * 256)));
  const body = build(B, [{ name: 'slow', filename: 's.bin', data }]);
  const parts = parseInChunks(B, body, 3);
  t.equal(parts[0]!.sha256, createHash('sha256').update(data).digest('hex'));
  // nothing per write is retained (a slow client must not pin memory per byte it sends)
  t.equal(parts[0]!.data().buffer.byteLength, data.length, 'the storage is the part, no slack and no slices');
  t.ok(parts[0]!.data().equals(data));
  const mixed = parseAt(B, body, [50, 51, 52, 3000, 9000, 9001, 12500, 20000, 20003, 60000]);
  t.ok(mixed[0]!.data().equals(data), 'small and large slices interleave in order');
});

t.test('data() owns its ArrayBuffer, is cached, and can be transferred', async (t) => {
  const data = Buffer.from('hello transferable world');
  const [part] = parseAt(B, build(B, [{ name: 'x', filename: 'x', data }]), []);
  const buf = part!.data();
  t.equal(buf.byteOffset, 0);
  t.equal(buf.buffer.byteLength, data.length, 'no pool slab behind it');
  t.equal(part!.data(), buf, 'second call returns the same Buffer');
  const moved = structuredClone(buf.buffer, { transfer: [buf.buffer] });
  t.equal(moved.byteLength, data.length);
  t.equal(buf.buffer.byteLength, 0, 'the source was detached by the transfer');
  t.same(Buffer.from(moved), data);
});

t.test('release() gives the storage back at once: data() is empty after, twice is harmless', async (t) => {
  const data = Buffer.alloc(200_000, 7);
  const [part, other] = parseAt(B, build(B, [{ name: 'x', filename: 'x', data }, { name: 'y', filename: 'y', data }]), []);
  t.equal(part!.data().length, data.length);
  part!.release!();
  t.equal(part!.data().length, 0, 'no bytes after release');
  t.equal(part!.data().buffer.byteLength, 0);
  part!.release!();
  t.ok(other!.data().equals(data), 'other parts keep their bytes');
  const buf = other!.data();
  structuredClone(buf.buffer, { transfer: [buf.buffer] });
  t.doesNotThrow(() => other!.release!(), 'a transferred part releases nothing and does not throw');
});

t.test('padding, first boundary at offset 0, close delimiter without CRLF', async (t) => {
  const body = Buffer.from(`--${B} \t\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--${B}--`);
  const parts = parseAt(B, body, []);
  t.same(summary(parts).map((p) => [p.name, Buffer.from(p.data, 'hex').toString()]), [['a', '1']]);
  const closeOnly = parseAt(B, Buffer.from(`--${B}--\r\n`), []);
  t.same(closeOnly, [], 'a body with no parts is well-formed');
});

t.test('Content-Disposition: quoting, escapes, case, filename*', async (t) => {
  const cases: [string, Partial<PartHeaders>][] = [
    ['form-data; name="a\\"b"; filename="c:\\\\x.png"', { name: 'a"b', filename: 'c:\\x.png' }],
    ['FORM-DATA; NAME="up"; FileName="f.png"', { name: 'up', filename: 'f.png' }],
    ['form-data;name=plain;filename=my photo.png', { name: 'plain', filename: 'my photo.png' }],
    ['form-data; name="a;b=c"', { name: 'a;b=c', filename: null }],
    ['form-data; name=""', { name: '', filename: null }],
    [`form-data; name="n"; filename="eur.png"; filename*=UTF-8''%E2%82%AC.png`, { name: 'n', filename: '\u20ac.png' }],
    [`form-data; name="n"; filename*=iso-8859-1'en'%E9.png`, { name: 'n', filename: '\u00e9.png' }],
    [`form-data; name="n"; filename="keep.png"; filename*=UTF-8''%ZZ`, { name: 'n', filename: 'keep.png' }],
    [`form-data; name="n"; filename*=koi8-r''x`, { name: 'n', filename: null }],
    ['form-data; name="n"; size=3; creation-date="x"', { name: 'n', filename: null }],
  ];
  for (const [cd, want] of cases) {
    const body = Buffer.from(`--${B}\r\nContent-Disposition: ${cd}\r\ncontent-type:  image/png \r\nX-Other: y\r\n\r\nz\r\n--${B}--`);
    const seen: PartHeaders[] = [];
    const p = new MultipartParser(B, LIMITS, { onPartStart: (h) => seen.push(h) });
    p.write(body);
    const [part] = p.end();
    t.same({ name: part!.name, filename: part!.filename }, want, cd);
    t.equal(part!.contentType, 'image/png');
    t.same(seen, [{ name: part!.name, filename: part!.filename, contentType: 'image/png' }], 'onPartStart saw the headers');
  }
});

t.test('handlers run in stream order: start before the body, end at the delimiter', async (t) => {
  const log: string[] = [];
  const p = new MultipartParser(B, LIMITS, {
    onPartStart: (h) => log.push(`start ${h.name}`),
    onPartEnd: (r) => log.push(`end ${r.name} ${r.size}`),
  });
  const body = build(B, [{ name: 'a', data: Buffer.from('xyz') }, { name: 'b', data: Buffer.from('') }]);
  const firstBody = body.indexOf('xyz');
  p.write(body.subarray(0, firstBody + 1));
  t.same(log, ['start a'], 'a started, not yet ended');
  p.write(body.subarray(firstBody + 1));
  t.same(log, ['start a', 'end a 3', 'start b', 'end b 0']);
  t.equal(p.end().length, 2);
});

t.test('part size limit: exact limit passes, one byte over fails in the crossing write', async (t) => {
  const atLimit = Buffer.alloc(MiB, 0x61);
  const ok = parseInChunks(B, build(B, [{ name: 'img', filename: 'i.png', data: atLimit }]), 64 * 1024);
  t.equal(ok[0]!.size, MiB, 'exactly 1 MiB accepted');
  t.equal(ok[0]!.sha256, createHash('sha256').update(atLimit).digest('hex'));

  // 1 MiB + 1 followed by another MiB the parser must never need to see.
  const body = build(B, [{ name: 'img', filename: 'i.png', data: Buffer.alloc(2 * MiB + 1, 0x61) }]);
  const firstData = body.indexOf('\r\n\r\n') + 4;
  const crossing = firstData + MiB; // offset of the first byte past the limit
  const p = new MultipartParser(B, LIMITS);
  const chunk = 50_000; // not aligned with the limit, so the crossing falls inside a chunk
  let at = 0;
  let err: MultipartError | null = null;
  for (; at < body.length; at += chunk) {
    try {
      p.write(Buffer.from(body.subarray(at, at + chunk)));
    } catch (e) {
      err = e as MultipartError;
      break;
    }
  }
  t.ok(err instanceof MultipartError);
  t.equal(err!.kind, 'part_too_large');
  t.equal(err!.partName, 'img');
  t.equal(err!.code, 'payload_too_large');
  t.match(err!.message, /"img"/);
  t.ok(at <= crossing && crossing < at + chunk, 'thrown by the write that carried byte limit+1');
  t.ok(at + chunk < body.length, 'most of the body was never written');
  t.equal(catchError(() => p.write(Buffer.from('more'))), err, 'later writes rethrow');
  t.equal(catchError(() => p.end()), err, 'end rethrows');
});

t.test('part limit edge at every split offset, with a small limit', async (t) => {
  const limits = { ...LIMITS, maxPartBytes: 16 };
  const fits = build(B, [{ name: 'm', data: Buffer.alloc(16, 0x78) }, { name: 'n', data: Buffer.from('\r\n--') }]);
  let badFits = 0;
  for (let i = 0; i <= fits.length; i++) {
    const sizes = parseAt(B, fits, [i], limits).map((p) => p.size);
    if (sizes.join() !== '16,4') badFits++;
  }
  t.equal(badFits, 0, 'a part of exactly the limit passes at every split');

  const over = build(B, [{ name: 'm', data: Buffer.alloc(17, 0x78) }]);
  const byte17 = over.indexOf('\r\n\r\n') + 4 + 16;
  let badOver = 0;
  for (let i = 0; i <= over.length; i++) {
    const p = new MultipartParser(B, limits);
    let first: MultipartError | null = null;
    try {
      p.write(Buffer.from(over.subarray(0, i)));
    } catch (e) {
      first = e as MultipartError;
    }
    // The write that carries byte 17 is the one that must throw, whichever of the two it is.
    if (i > byte17) {
      if (first?.kind !== 'part_too_large') badOver++;
    } else if (first !== null || catchError(() => p.write(Buffer.from(over.subarray(i)))).kind !== 'part_too_large') {
      badOver++;
    }
  }
  t.equal(badOver, 0, 'one byte over fails in the crossing write at every split');
});

t.test('too many parts: the limit is fine, the next part fails when it starts', async (t) => {
  const limits = { ...LIMITS, maxParts: 2 };
  const two = [{ name: 'a', data: Buffer.from('1') }, { name: 'b', data: Buffer.from('2') }];
  t.equal(parseAt(B, build(B, two), [], limits).length, 2);
  const three = build(B, [...two, { name: 'c', data: Buffer.alloc(100) }]);
  const starts: string[] = [];
  const p = new MultipartParser(B, limits, { onPartStart: (h) => starts.push(h.name) });
  const thirdLine = three.lastIndexOf(`--${B}\r\nContent-Disposition: form-data; name="c"`);
  p.write(three.subarray(0, thirdLine + B.length + 3));
  const err = catchError(() => p.write(three.subarray(thirdLine + B.length + 3, thirdLine + B.length + 4)));
  t.equal(err.kind, 'too_many_parts');
  t.same(starts, ['a', 'b']);
});

t.test('header block limit', async (t) => {
  const head = `--${B}\r\nContent-Disposition: form-data; name="a"\r\n`;
  const block = (pad: number) => `X-Pad: ${'p'.repeat(pad)}\r\n\r\n`;
  const base = Buffer.byteLength(`Content-Disposition: form-data; name="a"\r\n${block(0)}`);
  const limits = { ...LIMITS, maxHeaderBytes: base + 10 };
  const exact = Buffer.from(`${head}${block(10)}v\r\n--${B}--`);
  t.equal(parseInChunks(B, exact, 1, limits)[0]!.name, 'a', 'a header block of exactly the limit is read');
  const over = Buffer.from(`${head}${block(11)}v\r\n--${B}--`);
  t.equal(catchError(() => parseAt(B, over, [], limits)).kind, 'header_too_large');
  t.equal(catchError(() => parseInChunks(B, over, 1, limits)).kind, 'header_too_large');

  // A header that never ends fails once the limit is crossed, not at end().
  const p = new MultipartParser(B, limits);
  p.write(Buffer.from(head));
  const err = catchError(() => p.write(Buffer.alloc(MiB, 0x61)));
  t.equal(err.kind, 'header_too_large');
});

t.test('malformed bodies', async (t) => {
  const cd = 'Content-Disposition: form-data; name="a"';
  const bad: [string, string, RegExp][] = [
    ['no closing boundary', `--${B}\r\n${cd}\r\n\r\nabc\r\n`, /closing boundary.*"a"/],
    ['ends inside headers', `--${B}\r\n${cd}\r\n`, /closing boundary/],
    ['only a preamble', 'hello world', /closing boundary/],
    ['empty body', '', /closing boundary/],
    ['delimiter without CRLF before', `x--${B}--`, /closing boundary/],
    ['garbage header line', `--${B}\r\n${cd}\r\nthis is not a header\r\n\r\nx\r\n--${B}--`, /without a name/],
    ['space in header name', `--${B}\r\n${cd}\r\nBad Name: v\r\n\r\nx\r\n--${B}--`, /header name/],
    ['folded header', `--${B}\r\n${cd}\r\n  ; filename="x"\r\n\r\nx\r\n--${B}--`, /folded/],
    ['bare LF in headers', `--${B}\r\n${cd}\nX: y\r\n\r\nx\r\n--${B}--`, /bare CR or LF/],
    ['missing name', `--${B}\r\nContent-Disposition: form-data; filename="f"\r\n\r\nx\r\n--${B}--`, /no name/],
    ['no Content-Disposition', `--${B}\r\nContent-Type: text/plain\r\n\r\nx\r\n--${B}--`, /no Content-Disposition/],
    ['no headers at all', `--${B}\r\n\r\nx\r\n--${B}--`, /no Content-Disposition/],
    ['attachment disposition', `--${B}\r\nContent-Disposition: attachment; name="a"\r\n\r\nx\r\n--${B}--`, /form-data/],
    ['two names', `--${B}\r\n${cd}; name="b"\r\n\r\nx\r\n--${B}--`, /twice/],
    ['two dispositions', `--${B}\r\n${cd}\r\n${cd}\r\n\r\nx\r\n--${B}--`, /two Content-Disposition/],
    ['unterminated quote', `--${B}\r\nContent-Disposition: form-data; name="a\r\n\r\nx\r\n--${B}--`, /unterminated/],
    ['junk after quoted value', `--${B}\r\nContent-Disposition: form-data; name="a"b\r\n\r\nx\r\n--${B}--`, /separated/],
    ['delimiter followed by garbage', `--${B}\r\n${cd}\r\n\r\nx\r\n--${B}X\r\n`, /followed by other data/],
    ['single dash after delimiter', `--${B}-\r\n`, /single "-"/],
    ['padding then garbage', `--${B}  x\r\n`, /trailing data/],
    ['CR without LF', `--${B}\rX`, /CRLF/],
  ];
  for (const [label, text, msg] of bad) {
    const body = Buffer.from(text);
    const whole = catchError(() => parseAt(B, body, []));
    t.equal(whole.kind, 'malformed', label);
    t.equal(whole.code, 'invalid_input', label);
    t.match(whole.message, msg, label);
    t.equal(catchError(() => parseInChunks(B, body, 1)).kind, 'malformed', `${label}, 1-byte chunks`);
  }
});

t.test('misuse is reported, not silently accepted', async (t) => {
  t.throws(() => new MultipartParser('', LIMITS), RangeError);
  t.throws(() => new MultipartParser('a'.repeat(71), LIMITS), RangeError);
  t.throws(() => new MultipartParser('ok', { ...LIMITS, maxParts: -1 }), RangeError);
  const p = new MultipartParser(B, LIMITS);
  p.write(Buffer.from(`--${B}--`));
  t.same(p.end(), []);
  t.throws(() => p.write(Buffer.from('x')), /after end/);
  const failing = new MultipartParser(B, LIMITS, {
    onPartStart: () => {
      throw new Error('unexpected part');
    },
  });
  t.throws(() => failing.write(build(B, [{ name: 'a', data: Buffer.from('1') }])), /unexpected part/);
  t.throws(() => failing.end(), /unexpected part/, 'a handler failure poisons the parser too');
});
