import t from 'tap';
import { PgBackend } from '../../src/store/pg/index.ts';
import type { Reservation } from '../../src/store/records.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { reserveInput, T0, tokenRecord } from './contract.ts';

// PostgreSQL's recovery of a dead API worker (src/store/pg/recovery.ts recoverThread), in
// process on a real PostgreSQL started by this file. Each API worker is a node of its own whose
// info names host, pid, pid start time and thread (lease.ts); recovering thread 7 of this
// process ends that node's lease and sweeps it, and touches nothing else: this process's node
// of another thread and another process's node of thread 7 keep their reservations, units and
// keys, and their leases. The LMDB counterpart is test/metering/worker-death.test.ts "LMDB
// recoverThread". Until this file the PostgreSQL rule was held only by that file's
// spawned-server case: issue 43's mutation check (bench/results/mutation-check.md) planted
// "recoverThread ends the lease of every node of this process but the dead one's" and no
// in-process test failed.

const server = await startPostgres();
t.teardown(() => server.stop());

t.test("PostgreSQL recoverThread: the dead thread's node of this process only", async (t) => {
  const [live, dead, other] = await Promise.all([0, 1, 2].map(() => PgBackend.open(server.url, { leaseMs: 60_000 })));
  t.teardown(() => Promise.all([live, dead, other].map((n) => n!.close())));
  // the node ids as registered (a node whose lease ended registers anew at its next renewal)
  const ids = { live: live!.node, dead: dead!.node, other: other!.node };
  // every node of this file registers as the test's main thread (thread 0 of this process):
  // two of them are given the names an API worker's node and another process's node have
  await live!.pool.query(`UPDATE nodes SET info = jsonb_set(info, '{thread}', '7') WHERE id = $1`, [ids.dead]);
  await live!.pool.query(
    `UPDATE nodes SET info = info || jsonb_build_object('thread', 7, 'pid', $2::int, 'pid_start', '1') WHERE id = $1`,
    [ids.other, process.pid + 100_000],
  );
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await live!.insertToken(tok);
  const reserve = async (node: PgBackend, key: string): Promise<Reservation> => {
    const out = await node.reserve(reserveInput(tok, { idempotencyKey: key, fingerprint: 'fp' }));
    if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
    return out.reservation;
  };
  const own = await reserve(live!, 'k-own');
  const gone = await reserve(dead!, 'k-dead');
  const elsewhere = await reserve(other!, 'k-other');
  t.same([own.node, gone.node, elsewhere.node], [ids.live, ids.dead, ids.other], 'each reservation names the node that made it');

  const recovered = await live!.recoverThread(7, T0 + 10);
  t.same(recovered.map((r) => r.id), [gone.id], "only thread 7's node of this process is swept");
  t.equal((await live!.getReservation(gone.id))!.state, 'refunded');
  t.equal((await live!.getReservation(own.id))!.state, 'pending', "this process's other thread keeps its reservation");
  t.equal((await live!.getReservation(elsewhere.id))!.state, 'pending', "another process's thread 7 keeps its reservation");
  t.same((await live!.usageSnapshot(tok, T0)).map((u) => u.used), [2], 'one unit given back, two still held');
  t.equal(await live!.healthy(), true, "the recovering node's own lease is untouched");
  const leases = (await live!.pool.query('SELECT id, lease_until > now() AS held FROM nodes WHERE id = ANY($1)', [[ids.live, ids.dead, ids.other]])).rows as { id: string; held: boolean }[];
  t.same(Object.fromEntries(leases.map((l) => [l.id, l.held])), { [ids.live]: true, [ids.dead]: false, [ids.other]: true }, "only the dead thread's lease is ended");

  t.same(await live!.recoverThread(7, T0 + 20), [], 'a second recovery refunds nothing more');
  t.equal((await live!.reserve(reserveInput(tok, { idempotencyKey: 'k-dead', fingerprint: 'fp', at: T0 + 30 }))).kind, 'reserved', "the dead thread's key is free");
  t.equal((await live!.reserve(reserveInput(tok, { idempotencyKey: 'k-own', fingerprint: 'fp' }))).kind, 'request_in_progress', "the live thread's key is held");
  t.equal((await live!.reserve(reserveInput(tok, { idempotencyKey: 'k-other', fingerprint: 'fp' }))).kind, 'request_in_progress', "the other process's key is held");
  t.same((await live!.listLedger({ token_id: tok.id })).items.filter((e) => e.kind === 'refund').length, 1, 'one refund in the ledger');
  t.ok((await live!.verifyLedger()).ok, 'the ledger verifies');
});
