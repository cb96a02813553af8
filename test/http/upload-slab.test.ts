// Upload storage through the real server: parts live in the API workers' frame slabs
// (src/images/frame-slab.ts) and every slot comes back, whatever became of the call: answered,
// refused as invalid, refused by quota, failed in inference, abandoned by its client mid-upload,
// or with a part that outgrew its slot. A slot that never came back would leave the slab
// smaller for the rest of the process's life, so this is watched through
// lv_upload_slab_slots_in_use. The service's app and engine in process (test/helpers/api.ts; was
// one server start): the slab is this process's, as it is each API worker thread's.

import t from 'tap';
import { RGB8_BYTES } from '../../src/contract/index.ts';
import { postVerify, request, sequence, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { multipart, RawConn, verifyHead } from '../helpers/ingest.ts';

const server = await startApi({ engine: 'real', ready: true, env: { TEST_INFERENCE_FAIL_PREFIX: 'fail-' } });
t.teardown(() => server.stop());

async function slotsInUse(): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const m = /^lv_upload_slab_slots_in_use (\S+)$/m.exec(text);
  if (!m) throw new Error('lv_upload_slab_slots_in_use missing from /metrics');
  return Number(m[1]);
}

const allBack = () => waitFor(async () => (await slotsInUse()) === 0, { what: 'every upload slot back (lv_upload_slab_slots_in_use 0)' });

async function residentBytes(): Promise<number> {
  const m = /^lv_upload_slab_resident_bytes (\S+)$/m.exec(await (await fetch(`${server.baseUrl}/metrics`)).text());
  if (!m) throw new Error('lv_upload_slab_resident_bytes missing from /metrics');
  return Number(m[1]);
}

// first: it counts the slab's pages from a slab nobody has written yet
t.test('the slab\'s resident bytes: the pages its parts wrote, kept after the call', async (t) => {
  t.equal(await residentBytes(), 0, 'no upload yet: the slab is mapped, nothing of it resident');
  const { token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ encoding: 'rgb8' })]));
  t.equal(ok.status, 200);
  await allBack();
  t.equal(await residentBytes(), 4096 + RGB8_BYTES, 'two fresh slots: the metadata part\'s page and the frame\'s 75 pages, still resident with both slots back');
});

t.test('every outcome gives its upload slots back', async (t) => {
  t.equal(await slotsInUse(), 0, 'idle: no slot on loan');
  const { token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
  const { token: one } = await makeToken(server, ['rgb_liveness:1:day']);

  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([sequence(5, { encoding: 'rgb8' })]));
  t.equal(ok.status, 200, 'an rgb8 sequence, read in place from its slots, is answered');
  const png = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ encoding: 'png' })]));
  t.equal(png.status, 200, 'a PNG capture is answered');
  const failed = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'fail-1', encoding: 'rgb8' })]));
  t.equal(failed.status, 500, 'an inference failure');
  t.equal((await postVerify(server.baseUrl, one, 'rgb_liveness', request([single({ encoding: 'rgb8' })]))).status, 200);
  const over = await postVerify(server.baseUrl, one, 'rgb_liveness', request([single({ encoding: 'rgb8' })]));
  t.equal(over.status, 429, 'a quota refusal, after validation');

  // an rgb8 part one byte long of 400 KiB: it outgrows its slot, moves to a buffer of its
  // own, and is refused for its size
  const built = request([single({ encoding: 'rgb8' })]);
  const big = multipart([
    { name: 'metadata', type: 'application/json', data: JSON.stringify(built.metadata) },
    { name: 'image_0', filename: 'image_0.bin', type: 'application/octet-stream', data: Buffer.alloc(400 * 1024, 7) },
  ]);
  const refused = await postVerify(server.baseUrl, token, 'rgb_liveness', big);
  t.equal(refused.status, 422, 'a part past its slot is read and refused (wrong hash / size)');
  await allBack();
  t.pass('after answers of every kind, no slot is on loan');
});

t.test('a client that goes away mid-upload leaves no slot on loan', async (t) => {
  const { token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
  const b = request([sequence(6, { encoding: 'rgb8' })]);
  const body = Buffer.from(b.body);
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: body.length }));
  // two whole frames and part of a third: three parts on loan (metadata, frame 0, frame 1)
  // and one unfinished, then the client is gone
  await conn.write(body.subarray(0, Math.floor(body.length / 2)));
  await waitFor(async () => (await slotsInUse()) > 0, { what: 'the upload holding slots' });
  conn.socket.destroy();
  await allBack();
  t.pass('the abandoned upload gave every slot back');
});
