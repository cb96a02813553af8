// Short version of the kill -9 soak (the long one: `npm run soak`, bench/soak/kill-loop.ts).
//
// Issue 43: one started server and one kill. The start after the kill, which recovers the store
// and then finishes and replays every key, is the service's API in process on the killed
// server's DATA_DIR (test/helpers/api.ts: the real app, engine and LMDB store, and the start-up
// steps a start runs, crash recovery included); it was a started server. A second kill landing
// on a store that a recovery had itself left was a cycle of its own here (and a third before
// that): `npm run soak` runs 30 cycles (`--quick`: 3), each start recovering the last kill's
// store; the crash points a kill can land on are test/metering/crash-points.test.ts's, each
// produced on purpose. Planted by hand after the change: LMDB recovery refunding nothing
// (startupHooks' recoverPending skipped) fails "units used = keys completed" here.
import t from 'tap';
import { runKillLoop } from '../../bench/soak/kill-loop.ts';
import { startApi } from '../helpers/api.ts';

// a server start, bounded load and an in-process start: a hang detector on a loaded machine
t.setTimeout(600_000);

t.test('SIGKILL under idempotent load: replays byte-identical, ledger verified, units = keys completed', async (t) => {
  const r = await runKillLoop({
    cycles: 1,
    clients: 3,
    loadMsMin: 800,
    loadMsMax: 2000,
    seed: 7,
    log: (l) => t.comment(l),
    startFinal: ({ dataDir, env }) => startApi({ dataDir, env, engine: 'real', ready: true }),
  });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
  t.ok(Number(r.figures.keys_completed) > 0, 'the load completed keys');
  t.ok(Number(r.figures.replays_checked) === Number(r.figures.keys_completed), 'every completed key was replayed');
  t.equal(r.figures.ledger_ok, true);
});
