import t from 'tap';
import type { LmdbBackend } from '../../src/store/lmdb/index.ts';
import type { WriterClient } from '../../src/store/lmdb/writer-client.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { diskFull } from './world.ts';

// The in-process API (test/helpers/api.ts) serves from an API worker's LMDB handle whose
// metering writes travel to the process's metering writer thread, as they do in the service
// (src/store/lmdb/writer.ts): the store rules its tests drive run on the production path, not
// on the calling thread's own commits. Checked here by what the app's channel carries, and by
// a full disk planted in the writer thread through the app's store (world.ts diskFull).

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());

t.test('a verify call through the in-process API: its reservation and settlement go through the metering writer', async (t) => {
  const writer = (server.store as LmdbBackend).store.writer as WriterClient | null;
  t.ok(writer?.alive, 'the app\'s store has a live channel to the writer');
  t.equal((server.mainStore as LmdbBackend).store.writer, null, 'the main thread\'s handle commits its own writes, as the CLI does');

  const ops: string[] = [];
  const send = writer!.send.bind(writer);
  writer!.send = (op, lines) => {
    ops.push(op?.op ?? 'audit');
    return send(op, lines);
  };
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'one', seed: 1 })]), { 'idempotency-key': 'harness-writer-1' });
  t.equal(r.status, 200, r.text);
  t.same(ops.filter((o) => o !== 'audit'), ['reserve', 'settle'], 'the call\'s reservation, then its settlement, sent to the writer');
  const replay = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'one', seed: 1 })]), { 'idempotency-key': 'harness-writer-1' });
  t.equal(replay.headers.get('idempotency-replayed'), 'true', 'the key replays what the writer committed');
  t.equal(replay.text, r.text, 'byte for byte');
});

t.test('a full disk planted in the writer through the app\'s store: the call whose commit fails answers 503 store_unavailable, nothing charged, new calls refused until the disk has room; then its key runs afresh', async (t) => {
  const { id, token } = await makeToken(server, ['rgb_liveness:10:day']);
  const send = () => postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'full', seed: 2 })]), { 'idempotency-key': 'harness-writer-full' });
  const used = async () => (await server.store.usageSnapshot((await server.store.getToken(id))!, Date.now()))[0]!.used;
  // the next commit of the writer fails: the one with the call's reservation (answered before
  // its commit, writer-thread.ts), its settlement then hears it is gone
  const disk = await diskFull(server.store, 1);
  const failed = await send();
  t.equal(failed.status, 503, failed.text);
  t.equal(failed.json?.error?.code, 'store_unavailable');
  t.ok(Number(failed.headers.get('retry-after')) >= 1, 'Retry-After');
  t.equal(await used(), 0, 'nothing charged');
  const refused = await send();
  t.equal(refused.json?.error?.code, 'store_unavailable', 'while the probes find no room, a new call is refused');
  await disk.free();
  const retry = await send();
  t.equal(retry.status, 200, retry.text);
  t.not(retry.headers.get('idempotency-replayed'), 'true', 'the key was free: the retry ran afresh');
  t.equal(await used(), 1);
});

t.test('meteringWriter: false commits on the calling thread (the switch the harness offers)', async (t) => {
  const server = await startApi({ meteringWriter: false });
  t.teardown(() => server.stop());
  t.equal(server.store, server.mainStore, 'one handle');
  t.equal((server.store as LmdbBackend).store.writer, null, 'no channel to a writer');
});
