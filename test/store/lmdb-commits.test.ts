// LMDB_COMMITS=batched (docs/metering.md): the service charges, replays and
// refuses exactly as with the default synchronous commits. And what each commit carries.

import t from 'tap';
import { loadConfig } from '../../src/config/index.ts';
import { request, single, postVerify } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, tempDir } from '../helpers/server.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import type { AuditRecord } from '../../src/store/records.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';
import { atomically } from '../../src/store/lmdb/atomic.ts';

t.test('LMDB_COMMITS is sync by default, batched on request, nothing else', async (t) => {
  t.equal(loadConfig({}, '/srv', 2).LMDB_COMMITS, 'sync');
  t.equal(loadConfig({ LMDB_COMMITS: 'batched' }, '/srv', 2).LMDB_COMMITS, 'batched');
  t.throws(() => loadConfig({ LMDB_COMMITS: 'async' }, '/srv', 2), /LMDB_COMMITS/);
});

// Over real HTTP to the service's API in process, its real engine and its LMDB store opened with
// batched commits as a start opens it (test/helpers/api.ts; issue 43: this was a started
// server; batched commits in a real process, under a full disk too, are
// test/metering/full-disk.test.ts's).
t.test('a server with batched commits charges once, replays, and refuses past the quota', async (t) => {
  const server = await startApi({ engine: 'real', ready: true, env: { LMDB_COMMITS: 'batched' } });
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

// Audit lines ride in the thread's next write transaction (src/store/lmdb/audit-queue.ts):
// a charged call costs no commit for its audit line. lastTxnId counts LMDB's commits.
const auditLine = (requestId: string, tokenId: string | null = null): AuditRecord => ({
  request_id: requestId, at: new Date(T0).toISOString(), token_id: tokenId, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null,
  status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 1.5, outcome: 'live', replayed: false,
});
const commitsOf = (s: LmdbBackend) => (s.store.root.getStats() as { lastTxnId: number }).lastTxnId;
const auditIds = (s: LmdbBackend) => {
  s.store.root.resetReadTxn();
  return [...s.store.db.audit.getRange({})].map((e) => (e.value as AuditRecord).request_id);
};

for (const commits of ['sync', 'batched'] as const) {
  t.test(`${commits}: queued audit lines are written by the next metering commit, in no commit of their own`, async (t) => {
    // a delay no test run reaches: only a metering commit can write the lines
    const s = LmdbBackend.open(tempDir(), { commits, auditDelayMs: 600_000 });
    t.teardown(() => s.close());
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
    await s.insertToken(tok);
    const written = [s.writeAudit(auditLine('req_a', tok.id)), s.writeAudit(auditLine('req_b'))];
    const before = commitsOf(s);
    t.same(auditIds(s), [], 'queued, not written');
    const out = await s.reserve(reserveInput(tok));
    if (out.kind !== 'reserved') throw new Error(out.kind);
    await Promise.all(written);
    t.equal(commitsOf(s) - before, 1, 'one commit: the reservation, with both lines in it');
    t.same(auditIds(s).sort(), ['req_a', 'req_b']);
    t.same((await s.listAudit({ token_id: tok.id })).items.map((r) => r.request_id), ['req_a'], 'the token index is written with the row');

    // a charged call: its reservation and its settlement are its only commits, its audit line
    // waits for the next one
    const call = s.writeAudit(auditLine('req_c', tok.id));
    const c0 = commitsOf(s);
    const settled = await s.settle(out.reservation, T0 + 1, () => '{}', []);
    t.equal(settled.kind, 'settled');
    await call;
    t.equal(commitsOf(s) - c0, 1, 'the settlement carried the queued line');

    // a transaction whose callback throws writes nothing, and leaves the lines queued
    const kept = s.writeAudit(auditLine('req_d'));
    const refused = await s.settle(out.reservation, T0 + 2, () => '{}', []);
    t.not(refused.kind, 'settled', 'a settled reservation does not settle twice');
    t.equal(s.store.audit.length, 0, 'the marking commit after the refused settlement took the line');
    await kept;
    t.ok(auditIds(s).includes('req_d'));
  });
}

t.test('a worker with no metering commit writes its queue in one commit of its own after the delay', async (t) => {
  const s = LmdbBackend.open(tempDir(), { auditDelayMs: 20 });
  t.teardown(() => s.close());
  const before = commitsOf(s);
  await Promise.all(['req_1', 'req_2', 'req_3'].map((id) => s.writeAudit(auditLine(id))));
  t.same(auditIds(s), ['req_1', 'req_2', 'req_3']);
  t.equal(commitsOf(s) - before, 1, 'three lines, one commit');
});

t.test('a full queue is written at once; closing the store writes what is queued and refuses later lines', async (t) => {
  const dir = tempDir();
  const s = LmdbBackend.open(dir, { auditDelayMs: 600_000 });
  const max = s.store.audit.max;
  const lines = Array.from({ length: max }, (_, i) => s.writeAudit(auditLine(`req_full_${i}`)));
  await Promise.all(lines);
  t.equal(auditIds(s).length, max, `${max} lines written without a metering commit or the timer`);
  const late = s.writeAudit(auditLine('req_at_close'));
  await s.close();
  await late;
  await t.rejects(s.writeAudit(auditLine('req_after_close')), /closed/);
  const again = LmdbBackend.open(dir);
  t.teardown(() => again.close());
  t.ok(auditIds(again).includes('req_at_close'), 'the line queued at close was written');
});

// Group commit (atomic.ts): the transactions a thread asks for in one turn share one commit,
// each all or nothing on its own, each seeing the ones before it.
t.test('sync: the transactions of one turn share one commit; a throw undoes only its own; a race for the last unit admits one', async (t) => {
  const s = LmdbBackend.open(tempDir());
  t.teardown(() => s.close());
  const db = s.store.db.meta;
  const before = commitsOf(s);
  const outs = await Promise.allSettled([
    atomically(s.store, () => void db.put('g_a', 1)),
    atomically(s.store, () => {
      void db.put('g_b', 1);
      throw new Error('b refused');
    }),
    atomically(s.store, () => void db.put('g_c', 1)),
  ]);
  t.same(outs.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  t.equal(commitsOf(s) - before, 1, 'three transactions, one commit');
  s.store.root.resetReadTxn();
  t.same(['g_a', 'g_b', 'g_c'].map((k) => db.get(k)), [1, undefined, 1], 'the throwing one left nothing, the others are whole');

  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 2, period: 'never' }]);
  await s.insertToken(tok);
  const c0 = commitsOf(s);
  const race = await Promise.all([1, 2, 3].map(() => s.reserve(reserveInput(tok))));
  t.same(race.map((r) => r.kind).sort(), ['quota_exceeded', 'reserved', 'reserved'], 'three calls for two units: one refused, never over-admitted');
  t.equal(commitsOf(s) - c0, 1, 'one commit for the three reservations');
  t.same((await s.usageSnapshot(tok, T0)).map((u) => u.used), [2]);
  // a lone transaction that throws aborts its own commit, as before
  const c1 = commitsOf(s);
  await t.rejects(atomically(s.store, () => {
    void db.put('g_d', 1);
    throw new Error('alone');
  }), /alone/);
  t.equal(commitsOf(s), c1, 'nothing committed');
});
