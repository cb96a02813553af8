// An operator's login while bogus logins flood the server (security issue 29: 80 bogus logins
// in flight once made a real login take 17.8 s instead of 0.2 s). Figures only: the target
// ("a real login is answered in about the time of one password hash, or refused at once with
// Retry-After, never queued behind the flood") is judged by people reading them.
//
//   node --import tsx bench/login-flood.ts [--rounds N] [--flood N]
//
// Each round sends `flood` bogus logins, each from its own address (X-Forwarded-For through a
// trusted 127.0.0.1) and name so that the throttle lets every one reach the hash, then the
// operator's login while they are in flight; it reports the operator's time and answer and
// how the flood was answered (401 hashed, 503 turned away by the per-worker hash cap).
import { startServer } from './harness/server.ts';
import { loginRequest } from './harness/session-client.ts';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const rounds = arg('rounds', 5);
const flood = arg('flood', 80);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ADMIN = { username: 'root', password: 'correct horse battery' };

const server = await startServer({ env: { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TRUSTED_PROXIES: '127.0.0.1' } });
try {
  const timed = async () => {
    const t0 = performance.now();
    const r = await loginRequest(server.baseUrl, ADMIN.username, ADMIN.password, { 'x-forwarded-for': '10.9.9.9' });
    await r.arrayBuffer();
    return { ms: performance.now() - t0, status: r.status };
  };
  const quiet: number[] = [];
  for (let i = 0; i < rounds; i++) quiet.push((await timed()).ms);
  const busy: { ms: number; status: number }[] = [];
  const floodAnswers: Record<number, number> = {};
  let next = 0;
  for (let i = 0; i < rounds; i++) {
    const bogus = Array.from({ length: flood }, () => {
      const n = next++;
      return loginRequest(server.baseUrl, `bogus${n}`, 'not the password', { 'x-forwarded-for': `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` });
    });
    busy.push(await timed());
    for (const r of await Promise.all(bogus)) floodAnswers[r.status] = (floodAnswers[r.status] ?? 0) + 1;
  }
  const ok = busy.filter((b) => b.status === 200).map((b) => b.ms);
  console.log(JSON.stringify({
    rounds,
    flood,
    quiet_login_ms: { median: Math.round(median(quiet)), max: Math.round(Math.max(...quiet)) },
    login_during_flood: {
      answers: busy.map((b) => b.status),
      ms_when_200: ok.length ? { median: Math.round(median(ok)), max: Math.round(Math.max(...ok)) } : null,
      ms_all_max: Math.round(Math.max(...busy.map((b) => b.ms))),
    },
    flood_answers: floodAnswers,
  }, null, 2));
} finally {
  await server.stop();
}
