import { randomBytes, scryptSync } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { fileClock } from '../helpers/clock.ts';
import { startApi } from '../helpers/api.ts';
import { ROOT, runChild, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { client, login, loginRequest } from './session-client.ts';

// Security issue 29: the login throttle under concurrent guesses, the per-worker cap on
// password hashes, the rehash of older scrypt parameters and the failed-login log line, over
// real HTTP against the service's app on its LMDB store, in process (test/helpers/api.ts; was
// one server start). The hash gate is per API worker thread: here the one worker's.
//
// The pair limit is the documented one (docs/administration.md: "5 failures for one name from
// one address stop that pair"), not src/store/throttle-rules.ts's constant: were the constant
// raised by mistake, an expectation read from it would move with it and nothing would fail.
const PAIR_LIMIT = 5;
// scrypt at the test-only N=2^12 (TEST_PASSWORD_SCRYPT_N; 2^14 until issue 43, ~2 CPU-s more;
// planted HASH_QUEUE and QUEUED_PER_NETWORK = 1000, the flood test fails at 2^12 too): the file
// hashed some 45 passwords at the production 2^17, each ~0.4 s of a core on a quiet host and seconds on a loaded one, most of
// its time. What is tested does not depend on N: the throttle counts attempts before any hash,
// and the gate's cap holds at this cost too (the flood's attempts still arrive faster than the
// hashes end, as in login-flood.test.ts; the gate's rules themselves: hash-gate.test.ts). N=2^17
// itself, the production parameters when the knob is unset, is checked in a process of its own
// (the last test), where a real 2^17 hash is made and verified.
const TEST_N = 2 ** 12;
const dir = tempDir();
const clock = fileClock(dir, '2026-05-04T10:00:00.000Z');
const setClock = clock.set;
const ADMIN = { username: 'root', password: 'correct horse battery' };
const server = await startApi({
  dataDir: path.join(dir, 'data'),
  // 127.0.0.1 is a trusted proxy so that one test can speak for many client addresses
  env: { CLOCK_FILE: clock.file, ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TRUSTED_PROXIES: '127.0.0.1', TEST_PASSWORD_SCRYPT_N: String(TEST_N) },
});
t.teardown(() => server.stop());
const base = server.baseUrl;
// a new throttle window for each test: counts of the last one are forgotten
const nextWindow = () => setClock(clock.now() + 16 * 60_000);

const failedLogins = () => server.logLines().filter((l) => l.msg === 'login failed');
const answers = (rs: Response[]) => {
  const by: Record<number, number> = {};
  for (const r of rs) by[r.status] = (by[r.status] ?? 0) + 1;
  return by;
};

t.test('40 guesses for one name from one address at once: at most the pair limit are checked, the rest 429 unchecked', async (t) => {
  nextWindow();
  // a success from this address first, so that the pair limit alone stops the burst: from an
  // address the name never logged in from, the name's delay (past 5 failures from anywhere)
  // stops it at the same count, and a pair limit raised by one went unseen behind it
  t.equal((await loginRequest(base, ADMIN.username, ADMIN.password)).status, 200, 'a login from this address: a known one for the name now');
  const logged = failedLogins().length;
  // the right password is number 35, as in the report
  const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => loginRequest(base, ADMIN.username, i === 34 ? ADMIN.password : `guess ${i}`)));
  const by = answers(rs);
  t.ok((by[401] ?? 0) + (by[200] ?? 0) <= PAIR_LIMIT, `passwords checked: ${JSON.stringify(by)}`);
  t.equal(by[429], 40 - PAIR_LIMIT, 'every other guess is refused by the throttle');
  for (const r of rs.filter((r) => r.status === 429)) {
    t.equal((await r.json()).error.code, 'too_many_attempts');
    t.ok(Number(r.headers.get('retry-after')) > 0);
  }
  // the log says which answers ran a password check: invalid_credentials only
  const lines = await waitFor(() => (failedLogins().length - logged >= 40 - (by[200] ?? 0) ? failedLogins().slice(logged) : undefined), { what: 'a log line per failed login' });
  t.ok(lines.filter((l) => l.code === 'invalid_credentials').length <= PAIR_LIMIT);
  t.equal(lines.filter((l) => l.code === 'too_many_attempts').length, 40 - PAIR_LIMIT);
});

t.test('the right password arriving while a burst of guesses is in flight does not log in', async (t) => {
  nextWindow();
  const logged = failedLogins().length;
  const store = server.store;
  const guesses = Array.from({ length: 39 }, (_, i) => loginRequest(base, ADMIN.username, `burst ${i}`));
  // the right one is sent once the burst has spent the limit, its guesses still in flight
  await waitFor(async () => ((await store.readThrottle('127.0.0.1', ADMIN.username, clock.now())).pair?.count ?? 0) >= PAIR_LIMIT, { what: 'the burst to spend the pair limit' });
  const right = await loginRequest(base, ADMIN.username, ADMIN.password);
  const rs = await Promise.all(guesses);
  t.equal(right.status, 429, 'the right password is refused: the limit was spent by the burst');
  t.equal(right.headers.get('set-cookie'), null, 'no session');
  const by = answers(rs);
  t.equal(by[401], PAIR_LIMIT, `only the limit's guesses were checked: ${JSON.stringify(by)}`);
  t.equal(by[429], 39 - PAIR_LIMIT);
  const lines = await waitFor(() => (failedLogins().length - logged >= 40 ? failedLogins().slice(logged) : undefined), { what: 'a log line per failed login' });
  t.equal(lines.filter((l) => l.code === 'invalid_credentials').length, PAIR_LIMIT, 'passwords checked, from the log');
});

t.test('a success gives back its own count: only failures fill the address limit', async (t) => {
  nextWindow();
  // each login is counted on the address before its check; were the count kept, the
  // address limit (ADDRESS_LIMIT) would lock out an operator who only ever logs in right
  for (let i = 0; i < 3; i++) t.equal((await loginRequest(base, ADMIN.username, ADMIN.password)).status, 200, `login ${i}`);
  const store = server.store;
  t.equal((await store.readThrottle('127.0.0.1', ADMIN.username, clock.now())).address, undefined, 'no count left on the address');
});

t.test('a flood of logins from many addresses is answered 401 or 503 server_busy; the operator gets in during it from a known address', async (t) => {
  nextWindow();
  // 80 logins from 10 addresses, 8 each (a flood from more networks than the lane's places is
  // test/auth/login-flood.test.ts's: there the newcomer gets in)
  const flood = Array.from({ length: 80 }, (_, i) => loginRequest(base, `bogus${i}`, 'not a password', { 'x-forwarded-for': `198.51.100.${(i % 10) + 1}` }));
  // root logged in from 127.0.0.1 before: that login waits in the gate's first lane
  const operator = await loginRequest(base, ADMIN.username, ADMIN.password);
  t.equal(operator.status, 200, 'the operator is not kept out by the flood');
  const rs = await Promise.all(flood);
  const by = answers(rs);
  t.comment(`answers: ${JSON.stringify(by)}`);
  t.same(Object.keys(by).filter((s) => s !== '401' && s !== '503'), [], JSON.stringify(by));
  // 80 in flight against 2 workers x (1 hashing + 16 shared places + one more per network,
  // src/auth/hash-gate.ts): the rest are turned away at once instead of queueing behind the
  // flood (before the cap, all 80 were hashed)
  t.ok((by[503] ?? 0) > 0, 'hashes past the cap are refused, not queued');
  for (const r of rs.filter((r) => r.status === 503)) {
    t.equal((await r.json()).error.code, 'server_busy');
    t.equal(r.headers.get('retry-after'), '1');
  }
  t.equal((await fetch(`${base}/health/live`)).status, 200, 'the service is up');
});

t.test('a failed login is logged with the name and the client address, never the password', async (t) => {
  nextWindow();
  const logged = server.logs.length;
  const secret = 'a password that must not be logged';
  t.equal((await loginRequest(base, 'mallory', secret, { 'x-forwarded-for': '203.0.113.9' })).status, 401);
  const line = await waitFor(() => failedLogins().find((l) => l.username === 'mallory'), { what: 'the failed-login line' });
  t.equal(line.client_address, '203.0.113.9');
  t.equal(line.code, 'invalid_credentials');
  t.notOk(server.logs.slice(logged).some((l) => l.includes(secret)), 'the password is in no log line');
});

t.test('a hash with older scrypt parameters is rewritten with the current ones at the next successful login', async (t) => {
  nextWindow();
  const admin = client(base, await login(base, ADMIN.username, ADMIN.password));
  const made = await admin('POST', '/admin/api/users', { username: 'legacy', password: 'legacy password', role: 'admin', current_password: ADMIN.password });
  t.equal(made.status, 201);
  const store = server.store;
  const current = new RegExp(`^scrypt\\$${TEST_N}\\$8\\$1\\$`);
  t.match((await store.getUser(made.json.id))!.password_hash, current, 'new hashes carry the current parameters');
  // the user as an older build stored it: a lower N (2^17 replaced 2^15 in production)
  const salt = randomBytes(16);
  const oldN = TEST_N / 2;
  const old = `scrypt$${oldN}$8$1$${salt.toString('base64')}$${scryptSync('legacy password', salt, 32, { N: oldN, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }).toString('base64')}`;
  await store.updateUser(made.json.id, { password_hash: old });
  t.equal((await loginRequest(base, 'legacy', 'wrong password')).status, 401);
  t.equal((await store.getUser(made.json.id))!.password_hash, old, 'a wrong password rewrites nothing');
  t.equal((await loginRequest(base, 'legacy', 'legacy password')).status, 200, 'the old hash still verifies');
  const now = (await store.getUser(made.json.id))!.password_hash;
  t.match(now, current, 'rehashed with the current parameters');
  t.not(now, old);
  t.equal((await loginRequest(base, 'legacy', 'legacy password')).status, 200, 'and the new hash verifies');
});

t.test('without the test-only knob the parameters are the production ones: N=2^17, r=8, p=1', async (t) => {
  // a process of its own: N is fixed when src/auth/password.ts loads, and this one loaded it
  // with TEST_PASSWORD_SCRYPT_N set
  const env = { ...process.env };
  delete env.TEST_PASSWORD_SCRYPT_N;
  const code = `const m = await import('./src/auth/password.ts');
const stored = await m.hashPassword('a password');
console.log(JSON.stringify({ params: m.PARAMS, stored, verifies: await m.verifyPassword('a password', stored), rehash: m.needsRehash(stored), rehash15: m.needsRehash(stored.replace('$131072$', '$32768$')) }));`;
  const r = await runChild(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, env, limitMs: 120_000 });
  t.equal(r.code, 0, r.stderr);
  const got = JSON.parse(r.stdout);
  t.same(got.params, { N: 131072, r: 8, p: 1, keylen: 32 });
  t.match(got.stored, /^scrypt\$131072\$8\$1\$/, 'a new hash carries N=2^17');
  t.equal(got.verifies, true, 'and verifies');
  t.equal(got.rehash, false, 'a 2^17 hash is current');
  t.equal(got.rehash15, true, 'a 2^15 one is rewritten at its next login');
});
