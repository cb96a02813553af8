// Short version of the malformed-input fuzzer (the long one: `npm run soak`, bench/soak/fuzz.ts,
// against a started server). Here against the service's app and engine in process
// (test/helpers/api.ts: the uWS app an API worker serves, its parsers, admission and metering on
// the real LMDB store; issue 43: this was a server start): how malformed input is answered,
// and that it charges nothing, is the app's.
import t from 'tap';
import { runFuzz } from '../../bench/soak/fuzz.ts';
import { startApi } from '../helpers/api.ts';

// a bounded load: more than the default per-file bound when the machine is loaded; still a
// hang detector
t.setTimeout(600_000);

t.test('malformed multipart, metadata, PNGs and headers: no 5xx, no hang, nothing charged', async (t) => {
  // the soak's two API workers hold 4 verify slots: the same here, on one
  const r = await runFuzz({ count: 240, seed: 11, stalls: 1, log: (l) => t.comment(l), serve: () => startApi({ engine: 'real', ready: true, env: { VERIFY_SLOTS: '4' } }) });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
  t.equal(r.figures.calls, 240);
  t.equal(r.figures.ledger_ok, true);
});
