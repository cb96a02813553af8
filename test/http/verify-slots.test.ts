// VERIFY_SLOTS (issue 42, item 4): an operator's setting that sizes the host's verify slots
// apart from its API workers (docs/capacity.md, "Sizing API workers"). Over real HTTP: one API
// worker holds more than the spec's 2 slots when VERIFY_SLOTS says so, with the same admission
// rules. The defaults (2 slots per API worker) are held in-process by
// test/config/config-defaults.test.ts.
// The API worker is the service's app and engine in process (test/helpers/api.ts: the app
// composeApiWorker builds over a slot table of VERIFY_SLOTS, as src/cluster/cluster.ts sizes
// it; issue 43: this was a server start). The start line naming VERIFY_SLOTS is the main
// thread's (src/cluster/announce.ts): it is checked on test/http/tls.test.ts's real server,
// started with VERIFY_SLOTS set.
//
// Slots are held by uploads that have sent half their body (the rate window is set long, so
// they stay until the test sends the rest): no timing decides who holds what.

import t from 'tap';
import { metric, slotsUntil } from '../helpers/metrics.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { RawConn, expectRejected, finishHeld, headOnly, holdSlot } from '../helpers/ingest.ts';

async function connectedTo(port: number): Promise<RawConn> {
  const conn = new RawConn(port);
  await conn.connected;
  return conn;
}

t.test('WORKERS=1 with VERIFY_SLOTS=3: one API worker admits three calls, the fourth caller is refused as the host is full', async (t) => {
  const server = await startApi({ engine: 'real', ready: true, env: { WORKERS: '1', VERIFY_SLOTS: '3', TRUSTED_PROXIES: '127.0.0.1', UPLOAD_RATE_WINDOW_SECONDS: '300' } });
  t.teardown(() => server.stop());
  t.equal(await metric(server.baseUrl, 'lv_verify_slots'), 3, 'lv_verify_slots reports VERIFY_SLOTS');
  const tokens: Awaited<ReturnType<typeof makeToken>>[] = [];
  for (let i = 0; i < 4; i++) tokens.push(await makeToken(server, ['rgb_liveness:10000:day']));
  // three callers of load 1 each: a fourth, of load 0, finds no holder above its load + 1
  const held = [];
  for (let i = 0; i < 3; i++) held.push(await holdSlot(await connectedTo(server.port), tokens[i]!.token, `198.51.100.${i + 1}`));
  await slotsUntil(server.baseUrl, 3, 'three uploads in flight on the one worker');
  t.notOk(held.some((h) => h.conn.hasAnswer), 'all three admitted (none answered early)');
  const fourth = await expectRejected(t, server, tokens[3]!, () => headOnly(server.port, tokens[3]!.token, '198.51.100.4'), { status: 503, code: 'server_busy' });
  t.match(fourth.json?.error?.message, /No capacity slot/, 'refused for the host being full, not for a cap');
  const statuses = await Promise.all(held.map(finishHeld));
  t.same(statuses, [200, 200, 200], 'the three admitted calls complete');
  await slotsUntil(server.baseUrl, 0, 'every slot back');
});
