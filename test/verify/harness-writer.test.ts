import t from 'tap';
import type { LmdbBackend } from '../../src/store/lmdb/index.ts';
import type { WriterClient } from '../../src/store/lmdb/writer-client.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';

// The in-process API (test/helpers/api.ts) serves from an API worker's LMDB handle whose
// metering writes travel to the process's metering writer thread, as they do in the service
// (src/store/lmdb/writer.ts): the store rules its tests drive run on the production path, not
// on the calling thread's own commits. Checked here by what the app's channel carries.

t.test('a verify call through the in-process API: its reservation and settlement go through the metering writer', async (t) => {
  const server = await startApi({ engine: 'real', ready: true });
  t.teardown(() => server.stop());
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

t.test('meteringWriter: false commits on the calling thread (the switch the harness offers)', async (t) => {
  const server = await startApi({ meteringWriter: false });
  t.teardown(() => server.stop());
  t.equal(server.store, server.mainStore, 'one handle');
  t.equal((server.store as LmdbBackend).store.writer, null, 'no channel to a writer');
});
