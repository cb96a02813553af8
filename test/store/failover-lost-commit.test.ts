import t from 'tap';
import { PgBackend } from '../../src/store/pg/index.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';

// Issue 44 section 1, asynchronous replication: a promoted standby can lack the last commits
// of the old primary. A settlement answered 200 whose commit is missing leaves its
// reservation pending there, held by no call: without src/store/pg/lost-commits.ts its key
// answered request_in_progress for as long as the node lived. The database the node sees after
// the outage is made here by undoing the settlement's commit on a real PostgreSQL (what the
// standby held before that commit arrived); the real failover is test/store/failover.test.ts.
const server = await startPostgres();
t.teardown(() => server.stop());

/** the rows as they were before lv_settle committed */
async function loseSettlement(store: PgBackend, reservationId: string, requestId: string): Promise<void> {
  await store.pool.query(`UPDATE reservations SET state = 'pending', settled_at = NULL, settled_ms = NULL WHERE id = $1`, [reservationId]);
  await store.pool.query(`UPDATE idempotency SET state = 'pending', completed_at = NULL, completed_ms = NULL, status = NULL, body = NULL WHERE reservation_id = $1`, [reservationId]);
  await store.pool.query('DELETE FROM results WHERE request_id = $1', [requestId]);
}

t.test('after an outage: a lost settlement is put back with the answer given, one no longer remembered is refunded, calls in flight are left alone', async (t) => {
  const store = await PgBackend.open(server.url);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await store.insertToken(tok);
  const settled = async (key: string) => {
    const out = await store.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: key, at: T0 }));
    if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
    const s = await store.settle(out.reservation, T0 + 1, (usage) => JSON.stringify({ key, usage }), [{ key }]);
    if (s.kind !== 'settled') throw new Error(`not settled: ${s.kind}`);
    return { reservation: out.reservation, body: s.body };
  };
  const lost = await settled('k-lost');
  const forgotten = await settled('k-forgotten');
  const kept = await settled('k-kept');
  const inFlight = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-in-flight', fingerprint: 'k-in-flight', at: T0 }));
  if (inFlight.kind !== 'reserved') throw new Error('not reserved');
  await loseSettlement(store, lost.reservation.id, lost.reservation.request_id);
  await loseSettlement(store, forgotten.reservation.id, forgotten.reservation.request_id);
  // older than the node remembers
  (store.recent as unknown as { items: Map<string, unknown> }).items.delete(forgotten.reservation.id);

  const before = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-lost', fingerprint: 'k-lost', at: T0 + 2 }));
  t.equal(before.kind, 'request_in_progress', 'the symptom: the key of an answered call waits');

  const found = await store.restoreLostCommits(50);
  t.same(found.sort((a, b) => a.reservation.localeCompare(b.reservation)), [
    { reservation: lost.reservation.id, outcome: 'restored' },
    { reservation: forgotten.reservation.id, outcome: 'refunded' },
  ].sort((a, b) => a.reservation.localeCompare(b.reservation)), 'the lost one restored, the forgotten one refunded, nothing else touched');

  const replay = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-lost', fingerprint: 'k-lost', at: T0 + 3 }));
  t.same(replay, { kind: 'replay', status: 200, body: lost.body }, 'the key replays the very bytes answered before the outage');
  t.equal((await store.getReservation(lost.reservation.id))!.state, 'charged', 'charged once');
  t.equal((await store.getReservation(forgotten.reservation.id))!.state, 'refunded');
  const again = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-forgotten', fingerprint: 'k-forgotten', at: T0 + 3 }));
  t.equal(again.kind, 'reserved', 'the forgotten one\'s key is free: a retry runs again');
  t.equal((await store.getReservation(kept.reservation.id))!.state, 'charged', 'a settlement the database has is left alone');
  t.equal((await store.getReservation(inFlight.reservation.id))!.state, 'pending', 'a call in flight keeps its reservation');
  t.ok((await store.verifyLedger()).ok, 'the ledger verifies');
  t.same(await store.restoreLostCommits(50), [], 'nothing more to find: the call in flight is held');
});
