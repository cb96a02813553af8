// LMDB_COMMITS=batched (docs/metering.md): the service charges, replays and
// refuses exactly as with the default synchronous commits.

import t from 'tap';
import { loadConfig } from '../../src/config/index.ts';
import { request, single, postVerify } from '../helpers/captures.ts';
import { makeToken, startServer } from '../helpers/server.ts';

t.test('LMDB_COMMITS is sync by default, batched on request, nothing else', async (t) => {
  t.equal(loadConfig({}, '/srv', 2).LMDB_COMMITS, 'sync');
  t.equal(loadConfig({ LMDB_COMMITS: 'batched' }, '/srv', 2).LMDB_COMMITS, 'batched');
  t.throws(() => loadConfig({ LMDB_COMMITS: 'async' }, '/srv', 2), /LMDB_COMMITS/);
});

t.test('a server with batched commits charges once, replays, and refuses past the quota', async (t) => {
  const server = await startServer({ ready: true, env: { LMDB_COMMITS: 'batched', WORKERS: '2' } });
  t.teardown(() => server.stop());
  const tok = await makeToken(server, ['rgb_liveness:2:day']);
  const body = request([single({ encoding: 'rgb8' })]);
  const first = await postVerify(server.baseUrl, tok.token, 'rgb_liveness', body, { 'idempotency-key': 'k-1' });
  t.equal(first.status, 200);
  const again = await postVerify(server.baseUrl, tok.token, 'rgb_liveness', body, { 'idempotency-key': 'k-1' });
  t.equal(again.status, 200);
  t.equal(again.headers.get('idempotency-replayed'), 'true', 'the same key replays');
  t.equal((await postVerify(server.baseUrl, tok.token, 'rgb_liveness', request([single({ encoding: 'rgb8', seed: 2 })]))).status, 200);
  const over = await postVerify(server.baseUrl, tok.token, 'rgb_liveness', request([single({ encoding: 'rgb8', seed: 3 })]));
  t.equal(over.status, 429, 'the third capture is over the limit of 2');
  const me = (await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${tok.token}` } })).json()) as { usage: { module_id: string; used: number }[] };
  t.equal(me.usage.find((u) => u.module_id === 'rgb_liveness')?.used, 2, 'two units used: the replay and the refusal charged nothing');
});
