// Short version of the overload soak (the long one: `npm run soak`, bench/soak/overload.ts).
import t from 'tap';
import { runOverload } from '../../bench/soak/overload.ts';

// several server starts and a bounded load: more than the default per-file bound when the
// machine is loaded; still a hang detector
t.setTimeout(600_000);

t.test('4x the admitted concurrency: only 200 or 503, units = 200s, flat RSS', async (t) => {
  // short run, so the RSS bound is loose: it catches a leak per request, not slow drift. 10 s
  // (was 15 s with 96 MiB): each third is ~2/3 as many requests, so the bound is 2/3 as large
  // and a leak per request is caught from the same size (~150 KB); RSS between the middle and
  // last thirds moved by -18 and +4 MiB in two 10 s runs here
  const r = await runOverload({ seconds: 10, workers: 2, multiplier: 4, rssGrowthLimit: 64 * 1024 * 1024, log: (l) => t.comment(l) });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
  t.ok(Number(r.figures.answered_200) > 0, 'calls were served');
});
