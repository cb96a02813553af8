// The verify use case gives each part's storage back when the call is over (issue 15: 64
// uploads in flight must not keep every finished body until the next full GC), whatever the
// outcome, and only once nothing needs the bytes any more.

import t from 'tap';
import { createToken } from '../../src/admin/tokens.ts';
import { MultipartParser, parseMultipartBoundary } from '../../src/http/multipart/index.ts';
import type { ResultRecord } from '../../src/inference/types.ts';
import { verify, type VerifyDeps, type VerifyRequest } from '../../src/verify/index.ts';
import type { ReceivedPart } from '../../src/verify/ports.ts';
import { prepareRequest } from '../../src/verify/prepare.ts';
import { decodePng, frameSlab, type SlabSlot } from '../../src/images/index.ts';
import { request, sequence, single } from '../helpers/captures.ts';
import { addToken, lmdbStore, world } from './world.ts';

// on a real LMDB store, its metering the service's own (test/verify/world.ts); the engine is
// each test's, to look at the pixels it is handed
const { store } = lmdbStore(t);
const w = world(store);
const { plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
const demo = await createToken(store, { name: 'demo', demo: true, grants: [{ module_id: 'rgb_liveness', limit: null, period: 'never' }] });

function parts(body: Uint8Array, contentType: string): ReceivedPart[] {
  const p = new MultipartParser(parseMultipartBoundary(contentType)!, { maxPartBytes: 1 << 20, maxParts: 257, maxHeaderBytes: 8192 });
  p.write(Buffer.from(body));
  return p.end();
}

let calls = 0;

function call(received: ReceivedPart[], token = plaintext): VerifyRequest {
  return {
    requestId: `req-release-${++calls}`, moduleParam: 'rgb_liveness', authorization: `Bearer ${token}`, idempotencyKey: undefined,
    clientAddress: '127.0.0.1', startedAt: performance.now(), aborted: () => false, record: () => {},
    openBody: (onPartEnd) => {
      for (const p of received) onPartEnd(p);
      return Promise.resolve(received);
    },
  };
}

function deps(seen: { bytesAtInference: number[] }, fail = false): VerifyDeps {
  return {
    ...w.deps,
    metering: { ...w.deps.metering },
    inference: {
      readiness: () => [{ module_id: 'rgb_liveness', ready: true }] as never,
      infer: async (job) => {
        seen.bytesAtInference.push(...job.captures.flatMap((c) => c.pixels.map((p) => p?.length ?? 0)));
        if (fail) throw new Error('engine down');
        return job.captures.map(() => ({ status: 'ok' }) as unknown as ResultRecord);
      },
    },
  };
}

t.test('an answered call: the parts are released after inference had the pixels', async (t) => {
  const b = request([single({ encoding: 'png' })]);
  const received = parts(b.body, b.contentType);
  const seen = { bytesAtInference: [] as number[] };
  const answer = await verify(call(received), deps(seen));
  t.equal(answer.status, 200);
  t.same(seen.bytesAtInference, [307200], 'inference got the whole decoded frame');
  t.ok(received.length >= 2);
  for (const p of received) t.equal(p.data().length, 0, `part ${p.name} released`);
});

t.test('a call whose inference fails, and one refused as invalid, release their parts too', async (t) => {
  const b = request([single({ encoding: 'rgb8' })]);
  const received = parts(b.body, b.contentType);
  t.equal((await verify(call(received), deps({ bytesAtInference: [] }, true))).status, 500, 'failed inference answered 500');
  for (const p of received) t.equal(p.data().length, 0, `failed inference: part ${p.name} released`);

  const bad = request([single({ encoding: 'png' })]);
  const broken = parts(bad.body, bad.contentType);
  const image = broken.find((p) => p.name !== 'metadata')!;
  image.data()[100] ^= 0xff; // the hash no longer matches: a 422
  t.equal((await verify(call(broken), deps({ bytesAtInference: [] }))).status, 422, 'refused with a 422');
  for (const p of broken) t.equal(p.data().length, 0, `422: part ${p.name} released`);
});

t.test('a call gives its body back before inference (queued calls hold pixels, not uploads); a demo call only after its archive', async (t) => {
  for (const isDemo of [false, true]) {
    const b = request([single({ encoding: 'png' })]);
    const received = parts(b.body, b.contentType);
    const sizes = received.map((p) => p.data().length);
    let heldAtInference: number[] = [];
    let archived: number[] = [];
    const d = deps({ bytesAtInference: [] });
    d.metering.archiveDemoUpload = async (_dir, _at, _id, _meta, files) => {
      archived = files.map((f) => f.bytes.length);
    };
    const infer = d.inference.infer;
    d.inference.infer = (job) => {
      heldAtInference = received.map((p) => p.data().length);
      return infer(job);
    };
    const answer = await verify(call(received, isDemo ? demo.plaintext : plaintext), d);
    t.equal(answer.status, 200);
    if (isDemo) {
      t.same(heldAtInference, sizes, 'demo: the parts are whole while the call runs');
      t.same(archived, sizes.filter((_, i) => received[i]!.name !== 'metadata'), 'demo: the archive got every file part whole');
    } else {
      // the PNG part's frame-slab slot now holds its decoded pixels, read in place by inference
      t.same(heldAtInference, received.map((p) => (p.name === 'metadata' ? 0 : p.size)),
        'the metadata was released before inference; the image part is its frame\'s pixels');
    }
    for (const p of received) t.equal(p.data().length, 0, `part ${p.name} released at the end`);
  }
});

t.test('validation gives each image part back as soon as it is decoded, unless it holds its frame\'s pixels', async (t) => {
  // A PNG part in a frame-slab slot is decoded over its own bytes, so the slot is the frame's
  // pixels (as an rgb8 part's is) and the part stays until the call is over. A part without a
  // slot (every slot on loan) goes back at once: its pixels have memory of their own.
  const b = request([sequence(4, { encoding: 'png' })]);
  const received = parts(b.body, b.contentType);
  const log: string[] = [];
  const watched = received.map((p): ReceivedPart => ({
    name: p.name, filename: p.filename, contentType: p.contentType, size: p.size, sha256: p.sha256,
    data: () => {
      log.push(`data ${p.name}`);
      return p.data();
    },
    release: () => {
      log.push(`release ${p.name}`);
      p.release?.();
    },
  }));
  const prepared = prepareRequest('rgb_liveness', watched, undefined, true);
  const images = received.filter((p) => p.name !== 'metadata').map((p) => p.name);
  t.equal(images.length, 4);
  t.ok(log.includes('release metadata'), 'the metadata part went back');
  prepared.captures[0]!.pixels.forEach((px, i) => {
    const part = received.find((p) => p.name === images[i])!;
    t.notOk(log.includes(`release ${part.name}`), `${part.name} kept: its slot holds the frame`);
    t.ok(px!.length === 307200 && px!.buffer === part.data().buffer && px!.byteOffset === part.data().byteOffset,
      `frame ${i}: decoded into its part's slot`);
  });
  for (const p of received) p.release?.();

  const slab = frameSlab();
  const loans: SlabSlot[] = [];
  for (let s = slab.take(); s; s = slab.take()) loans.push(s);
  try {
    for (const encoding of ['png', 'rgb8'] as const) {
      const r = request([sequence(4, { encoding })]);
      const own = parts(r.body, r.contentType);
      const expected = new Map(own.map((p) => [p.name, Buffer.from(encoding === 'png' && p.name !== 'metadata' ? decodePng(p.data()) : p.data())]));
      const order: string[] = [];
      const seen = own.map((p): ReceivedPart => ({ ...p, data: () => p.data(), release: () => { order.push(p.name); p.release?.(); } }));
      const pixels = prepareRequest('rgb_liveness', seen, undefined, true).captures[0]!.pixels;
      const frames = own.filter((p) => p.name !== 'metadata').map((p) => p.name);
      t.same(order.slice(0, 4), frames, `${encoding} without a slot: each part released as it is decoded`);
      frames.forEach((name, i) => t.same(Buffer.from(pixels[i]!), expected.get(name), `${encoding} frame ${i}: pixels intact after the release`));
    }
  } finally {
    for (const l of loans) l.give();
  }

  const kept = parts(b.body, b.contentType);
  prepareRequest('rgb_liveness', kept, undefined, false);
  for (const p of kept) t.ok(p.data().length > 0, `without releaseParts (a demo call) ${p.name} is kept`);
  const keptImages = kept.filter((p) => p.name !== 'metadata');
  const originals = parts(b.body, b.contentType);
  for (const p of keptImages) {
    t.ok(p.data().equals(originals.find((o) => o.name === p.name)!.data()), `without releaseParts ${p.name} keeps its PNG bytes (for the demo archive)`);
  }
  for (const p of [...kept, ...originals]) p.release?.();
});

t.test('rgb8 parts in frame-slab slots are the pixels: read in place, kept until the call is over', async (t) => {
  const slab = frameSlab();
  const before = slab.taken;
  const b = request([sequence(4, { encoding: 'rgb8' })]);
  const received = parts(b.body, b.contentType);
  t.equal(slab.taken, before + received.length, 'every part got a slot');
  const original = new Map(received.map((p) => [p.name, Buffer.from(p.data())]));
  const frames = received.filter((p) => p.name !== 'metadata');
  let atInference: { shared: boolean; inPlace: boolean; same: boolean }[] = [];
  let heldAtInference: number[] = [];
  const d = deps({ bytesAtInference: [] });
  d.inference.infer = async (job) => {
    atInference = job.captures[0]!.pixels.map((px, i) => ({
      shared: px!.buffer instanceof SharedArrayBuffer,
      inPlace: px!.byteOffset === frames[i]!.data().byteOffset && px!.buffer === frames[i]!.data().buffer,
      same: Buffer.from(px!).equals(original.get(frames[i]!.name)!),
    }));
    heldAtInference = received.map((p) => p.data().length);
    return job.captures.map(() => ({ status: 'ok' }) as unknown as ResultRecord);
  };
  const answer = await verify(call(received), d);
  t.equal(answer.status, 200);
  t.same(atInference, frames.map(() => ({ shared: true, inPlace: true, same: true })), 'inference read each frame in its part\'s slot, no copy');
  t.same(heldAtInference, received.map((p) => (p.name === 'metadata' ? 0 : 307200)), 'the metadata went back before inference, the frames stayed');
  for (const p of received) t.equal(p.data().length, 0, `part ${p.name} released at the end`);
  t.equal(slab.taken, before, 'every slot is back');
});
