// Short version of the slow-client scenario (the long one: `npm run soak`, bench/soak/slow-client.ts).
// SLOW_CLIENT_PROFILE picks the expectations (bench/soak/slow-client.ts): `target` (default,
// issue 15's upload deadlines and per-address caps) or `uws_builtin` (uWS 20.30's own window).
import t from 'tap';
import { runSlowClient, SLOW_CLIENT_PROFILES } from '../../bench/soak/slow-client.ts';

// several server starts and a bounded load: more than the default per-file bound when the
// machine is loaded; still a hang detector
t.setTimeout(600_000);

const profile = (process.env.SLOW_CLIENT_PROFILE ?? 'target') as keyof typeof SLOW_CLIENT_PROFILES;

t.test(`slow clients (${profile}): tricklers get an answer or a close, honest clients stay served`, async (t) => {
  const expect = SLOW_CLIENT_PROFILES[profile];
  t.ok(expect, `known profile ${profile}`);
  // the paced client's 20 frames of 6.5 KB: about 140 KB at 10 KB/s, an upload of ~13.7 s, past
  // uWS's built-in cut-off (~10-12 s) with a margin (the default 8 KB frames took ~16.8 s)
  const r = await runSlowClient({ tricklers: 12, honestCalls: 3, pacedFrameBytes: 6656, expect, log: (l) => t.comment(l) });
  t.comment(JSON.stringify(r.figures));
  t.same(r.failures, [], 'no guarantee broken');
});
