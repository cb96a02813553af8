import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { setClockFile } from '../../src/clock.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Logger } from '../../src/observability/index.ts';
import { startupHooks } from '../../src/startup.ts';
import { request, single } from '../helpers/captures.ts';
import { tempDir } from '../helpers/server.ts';
import { addToken, call, lmdbStore, world } from '../verify/world.ts';

// Completed idempotency records are kept IDEMPOTENCY_RETENTION_HOURS (24), then pruned by the
// start-up hooks every process runs as it starts serving (src/startup.ts), in process: the verify
// use case on a real LMDB store in a temporary folder (test/verify/world.ts), the hooks run as
// src/main.ts runs them at each start, the service's clock (src/clock.ts, CLOCK_FILE's) moved
// between them.
// Replaces the spawned test/metering/idempotency-pruning.test.ts (three server starts on one
// DATA_DIR; issue 43): each of its checks is here. That a start runs these hooks is shown
// through real servers by the crash-recovery tests (test/metering/race-and-crash.test.ts,
// test/metering/crash-points.test.ts: the same hooks' recovery at start); the prune rule on
// PostgreSQL is test/store/contract.ts's.

const dir = tempDir();
const clockFile = path.join(dir, 'clock');
setClockFile(clockFile);
t.teardown(() => setClockFile(process.env.CLOCK_FILE || undefined));
const config = loadConfig({ DATA_DIR: dir });

/** one start of a process at `iso`: its start-up hooks, and the info lines they logged */
async function start(store: Parameters<typeof startupHooks>[0], iso: string) {
  fs.writeFileSync(clockFile, iso);
  const lines: { msg: string; obj: Record<string, unknown> }[] = [];
  const log = { info: (obj: Record<string, unknown>, msg: string) => void lines.push({ msg, obj }), warn: () => {}, error: () => {} } as unknown as Logger;
  // the first prune runs beside serving (src/startup.ts); awaited here, as the checks need it done
  await (await startupHooks(store, config, log)).firstPrune;
  return lines;
}

t.test('completed idempotency records are kept 24 hours, then pruned', async (t) => {
  const s = lmdbStore(t);
  const w = world(s.store);
  w.clock.at = Date.parse('2026-05-10T08:00:00.000Z');
  await start(s.store, '2026-05-10T08:00:00.000Z');
  const { plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
  const body = request([single({ id: 'kept' })]);
  const first = await call(w, plaintext, body, { idempotencyKey: 'k-retained' });
  t.equal(first.status, 200);

  // 23 h 59 min later (pruning runs at every start): still replayed
  w.clock.at = Date.parse('2026-05-11T07:59:00.000Z');
  t.same((await start(s.store, '2026-05-11T07:59:00.000Z')).filter((l) => l.msg === 'pruned completed idempotency records'), [], 'nothing pruned yet');
  const replay = await call(w, plaintext, body, { idempotencyKey: 'k-retained' });
  t.equal(replay.headers?.['Idempotency-Replayed'], 'true', 'kept for at least 24 h');
  t.equal(replay.body, first.body);

  w.clock.at = Date.parse('2026-05-11T08:00:01.000Z');
  const lines = await start(s.store, '2026-05-11T08:00:01.000Z');
  t.ok(lines.some((l) => l.msg === 'pruned completed idempotency records' && l.obj.pruned === 1), 'the start past 24 h pruned the one record, and logged it');
  const fresh = await call(w, plaintext, body, { idempotencyKey: 'k-retained' });
  t.equal(fresh.status, 200);
  t.equal(fresh.headers?.['Idempotency-Replayed'], undefined, 'pruned after 24 h: the key runs as new');
  t.not(JSON.parse(fresh.body as string).request_id, JSON.parse(first.body as string).request_id);
});

t.test('the start does not wait for the first prune (on LMDB it may index millions of keys), and a failed one is logged', async (t) => {
  const s = lmdbStore(t);
  let finish!: (n: number) => void;
  let fail!: (err: Error) => void;
  const passes: Promise<number>[] = [];
  const slow = Object.create(s.store) as typeof s.store;
  slow.pruneIdempotency = () => {
    const pass = new Promise<number>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
    passes.push(pass);
    return pass;
  };
  const errors: string[] = [];
  const log = { info: () => {}, warn: () => {}, error: (_: unknown, msg: string) => void errors.push(msg) } as unknown as Logger;
  const { firstPrune } = await startupHooks(slow, config, log);
  t.equal(passes.length, 1, 'the start began the prune, and returned while it runs');
  finish(0);
  await firstPrune;
  const second = await startupHooks(slow, config, log);
  fail(new Error('disk gone'));
  await second.firstPrune;
  t.same(errors, ['idempotency prune failed'], 'a failed pass is logged, not thrown at the start');
});
