// Short version of the overload soak (the long one: `npm run soak`, bench/soak/overload.ts).
import t from 'tap';
import { runOverload } from '../../bench/soak/overload.ts';

// several server starts and a bounded load: more than the default per-file bound when the
// machine is loaded; still a hang detector
t.setTimeout(600_000);

t.test('4x the admitted concurrency: only 200 or 503, units = 200s, flat RSS', async (t) => {
  // short run, so the RSS bound is loose: it catches a leak per request, not slow drift
  const r = await runOverload({ seconds: 15, workers: 2, multiplier: 4, rssGrowthLimit: 96 * 1024 * 1024, log: (l) => t.comment(l) });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
  t.ok(Number(r.figures.answered_200) > 0, 'calls were served');
});
