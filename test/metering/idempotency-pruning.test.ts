import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken, startServer, tempDir } from '../helpers/server.ts';

t.test('completed idempotency records are kept 24 hours, then pruned', async (t) => {
  const dir = tempDir();
  const dataDir = path.join(dir, 'data');
  const clock = path.join(dir, 'clock');
  fs.writeFileSync(clock, '2026-05-10T08:00:00.000Z');
  const env = { CLOCK_FILE: clock };
  let server = await startServer({ dataDir, env, ready: true });
  const { token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
  const body = request([single({ id: 'kept' })]);
  const first = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-retained' });
  t.equal(first.status, 200);
  await server.stop();

  // 23 h 59 min later (pruning runs at every start): still replayed
  fs.writeFileSync(clock, '2026-05-11T07:59:00.000Z');
  server = await startServer({ dataDir, env, ready: true });
  const replay = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-retained' });
  t.equal(replay.headers.get('idempotency-replayed'), 'true', 'kept for at least 24 h');
  t.equal(replay.text, first.text);
  await server.stop();

  fs.writeFileSync(clock, '2026-05-11T08:00:01.000Z');
  server = await startServer({ dataDir, env, ready: true });
  t.teardown(() => server.stop());
  t.ok(server.logLines().some((l) => l.msg === 'pruned completed idempotency records' && l.pruned === 1));
  const fresh = await postVerify(server.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'k-retained' });
  t.equal(fresh.status, 200);
  t.equal(fresh.headers.get('idempotency-replayed'), null, 'pruned after 24 h: the key runs as new');
  t.not(fresh.json.request_id, first.json.request_id);
});
