// Short version of the malformed-input fuzzer (the long one: `npm run soak`, bench/soak/fuzz.ts).
import t from 'tap';
import { runFuzz } from '../../bench/soak/fuzz.ts';

// several server starts and a bounded load: more than the default per-file bound when the
// machine is loaded; still a hang detector
t.setTimeout(600_000);

t.test('malformed multipart, metadata, PNGs and headers: no 5xx, no hang, nothing charged', async (t) => {
  const r = await runFuzz({ count: 240, seed: 11, stalls: 1, log: (l) => t.comment(l) });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
  t.equal(r.figures.calls, 240);
  t.equal(r.figures.ledger_ok, true);
});
