import t from 'tap';
import { transferable } from '../../src/inference/pool.ts';
import { createHash } from 'node:crypto';
import { buildBatch, encodePng } from '../../src/client/index.ts';
import { ValidationFailure } from '../../src/errors/codes.ts';
import { checkParts, parseMetadata, prepareCaptures } from '../../src/packets/index.ts';
import { FrameSlab, isSharedPixels } from '../../src/images/index.ts';

const rgb = (v: number) => new Uint8Array(307200).fill(v);
const frame = (i: number, bytes: Uint8Array) => ({
  timestamp_us: 10 + i * 10, source_size: [640, 480] as [number, number],
  eyes_xy: [[300, 200], [340, 200]] as [[number, number], [number, number]], image: { bytes },
});

function pipeline(files: Map<string, Uint8Array>, metadata: unknown) {
  const parsed = parseMetadata(JSON.stringify(metadata), 'rgb_liveness');
  const uploads = [...files].map(([name, b]) => ({ name, filename: 'f', size: b.length, sha256: createHash('sha256').update(b).digest('hex') }));
  const partIssues = checkParts(parsed.images, uploads);
  return { parsed, partIssues };
}

t.test('metadata + parts + images -> prepared captures with pixels per frame', async (t) => {
  const { metadata, files } = buildBatch([
    { mode: 'rgb_single', frames: [frame(0, encodePng(rgb(11)))] },
    { mode: 'rgb_sequence', frames: [frame(0, rgb(12)), { timestamp_us: 15, status: 'dropped' }, frame(2, encodePng(rgb(13)))] },
  ]);
  const { parsed, partIssues } = pipeline(files, metadata);
  t.same(partIssues, []);
  const prepared = prepareCaptures(parsed, (part) => files.get(part)!);
  t.equal(prepared.length, 2);
  t.same(prepared[1].pixels.map((p) => (p ? p[0] : null)), [12, null, 13]);
  t.equal(prepared[0].pixels[0]![307199], 11);
  for (const p of prepared.flatMap((c) => c.pixels)) if (p) t.equal(transferable(p), p, 'transferable without a copy');
});

t.test('every bad image of the request is reported at its frame', async (t) => {
  const { metadata, files } = buildBatch([
    { mode: 'rgb_single', frames: [frame(0, encodePng(new Uint8Array(300 * 320 * 3), 300, 320))] },
    { mode: 'rgb_sequence', frames: [frame(0, rgb(1)), frame(1, new Uint8Array(307199)), frame(2, encodePng(rgb(2), 320, 320, { colorType: 6 }))] },
  ]);
  const { parsed } = pipeline(files, metadata);
  const err = t.throws(() => prepareCaptures(parsed, (part) => files.get(part)!)) as unknown;
  t.ok(err instanceof ValidationFailure);
  t.same((err as ValidationFailure).detail.map((i) => `${i.loc.join('.')}:${i.type}`), [
    'body.metadata.captures.0.frames.0.image:png_wrong_size',
    'body.metadata.captures.1.frames.1.image:rgb8_wrong_size',
    'body.metadata.captures.1.frames.2.image:png_unsupported_color_type',
  ]);
});

t.test('a caller that consumes the parts gets PNG pixels in the parts\' own frame-slab slots', async (t) => {
  const { metadata, files } = buildBatch([
    { mode: 'rgb_single', frames: [frame(0, encodePng(rgb(21)))] },
    { mode: 'rgb_sequence', frames: [frame(0, encodePng(rgb(22))), frame(1, rgb(23))] },
  ]);
  const { parsed } = pipeline(files, metadata);
  const slab = new FrameSlab(8);
  const inSlots = new Map([...files].map(([name, b]) => {
    const slot = slab.take()!;
    slot.bytes.set(b);
    return [name, slot.bytes.subarray(0, b.length)];
  }));
  const seen: { part: string; samePlace: boolean }[] = [];
  const prepared = prepareCaptures(parsed, (part) => inSlots.get(part)!, [], (part, bytes, pixels) => {
    seen.push({ part, samePlace: !!pixels && pixels.buffer === bytes.buffer && pixels.byteOffset === bytes.byteOffset });
  });
  t.same(prepared.flatMap((c) => c.pixels.map((p) => p![307199])), [21, 22, 23]);
  t.ok(prepared.flatMap((c) => c.pixels).every((p) => p && isSharedPixels(p)), 'every frame read in place by inference');
  t.equal(seen.length, 3);
  t.ok(seen.every((s) => s.samePlace), 'each part is its frame\'s pixels: the caller keeps it until inference is over');
  // without the callback the caller may still need the bytes: PNG parts are left as they were
  const again = new Map([...files].map(([name, b]) => {
    const slot = slab.take()!;
    slot.bytes.set(b);
    return [name, slot.bytes.subarray(0, b.length)];
  }));
  const kept = prepareCaptures(parsed, (part) => again.get(part)!);
  t.same(kept.flatMap((c) => c.pixels.map((p) => p![0])), [21, 22, 23]);
  for (const [name, b] of files) t.ok(Buffer.from(again.get(name)!).equals(Buffer.from(b)), `${name} unchanged`);
});
