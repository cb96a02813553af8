import path from 'node:path';
import t from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { PAIR_LIMIT } from '../../src/store/throttle-rules.ts';
import { fileClock } from '../helpers/clock.ts';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { client, login, loginRequest } from '../auth/session-client.ts';

// Security issue 29, item 2: PATCH /admin/api/users/:id sets a password only with the acting
// operator's current password (a stolen session alone cannot take an account), checked under
// the login throttle; over real HTTP against the real server and store.
const dir = tempDir();
const clock = fileClock(dir, '2026-05-04T10:00:00.000Z');
const setClock = clock.set;
const ROOT_PASSWORD = 'correct horse battery';
// scrypt at the test-only N=2^10: these tests count password checks, not hash cost (N=2^17
// is tested in test/auth/login-concurrency.test.ts)
// the service's app in process on its real store (no models): test/helpers/api.ts (was one server start)
const server = await startApi({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock.file, ADMIN_USERNAME: 'root', ADMIN_PASSWORD: ROOT_PASSWORD, TEST_PASSWORD_SCRYPT_N: '1024' } });
t.teardown(() => server.stop());
const base = server.baseUrl;
const nextWindow = () => setClock(clock.now() + 16 * 60_000);

const root = client(base, await login(base, 'root', ROOT_PASSWORD));
const made = await root('POST', '/admin/api/users', { username: 'bob', password: 'bob password 1', role: 'admin', current_password: ROOT_PASSWORD });
t.equal(made.status, 201);
const bobId = made.json.id as string;

t.test('without current_password, or with a wrong one, nothing is changed and no session ends', async (t) => {
  const bob = await login(base, 'bob', 'bob password 1');
  const missing = await root('PATCH', `/admin/api/users/${bobId}`, { password: 'taken over!' });
  t.equal(missing.status, 422);
  t.same(missing.json.detail[0].loc, ['body', 'current_password']);
  t.equal(missing.json.detail[0].type, 'missing');

  const wrong = await root('PATCH', `/admin/api/users/${bobId}`, { password: 'taken over!', current_password: 'not my password' });
  t.equal(wrong.status, 403);
  t.equal(wrong.json.error.code, 'invalid_current_password');

  // a stolen session of bob's cannot change bob's own password either
  const own = await client(base, bob)('PATCH', `/admin/api/users/${bobId}`, { password: 'taken over!' });
  t.equal(own.status, 422);
  t.equal((await client(base, bob)('GET', '/auth/session')).status, 200, "bob's session is alive");
  t.equal((await loginRequest(base, 'bob', 'taken over!')).status, 401, 'the password is not changed');
  t.equal((await loginRequest(base, 'bob', 'bob password 1')).status, 200, 'the old one still works');
  t.ok(server.logLines().some((l) => l.msg === 'password check failed' && l.username === 'root' && l.client_address === '127.0.0.1'), 'the wrong one is logged, with who and where');
  t.equal((await root('PATCH', `/admin/api/users/${bobId}`, { enabled: true })).status, 200, 'other changes need no password');
});

t.test('with the acting operator\'s password: another user\'s and one\'s own password change', async (t) => {
  nextWindow();
  const bob = await login(base, 'bob', 'bob password 1');
  const other = await root('PATCH', `/admin/api/users/${bobId}`, { password: 'bob password 2', current_password: ROOT_PASSWORD });
  t.equal(other.status, 200);
  t.equal((await client(base, bob)('GET', '/auth/session')).status, 401, "bob's sessions end");
  t.equal((await loginRequest(base, 'bob', 'bob password 1')).status, 401);
  const bob2 = client(base, await login(base, 'bob', 'bob password 2'));
  const own = await bob2('PATCH', `/admin/api/users/${bobId}`, { password: 'bob password 3', current_password: 'bob password 2' });
  t.equal(own.status, 200);
  t.equal((await bob2('GET', '/auth/session')).status, 200, 'the changing session stays');
  t.equal((await loginRequest(base, 'bob', 'bob password 3')).status, 200);
});

t.test('the current password is guessed no faster than a login: the same throttle', async (t) => {
  nextWindow();
  const bob = client(base, await login(base, 'bob', 'bob password 3'));
  // All but the last guess the limit allows are written to the store as the server counts a
  // failed password check (each one over HTTP costs a full scrypt hash); the last one goes
  // through PATCH and must still be checked, and the next one must be refused.
  const store = LmdbBackend.open(server.dataDir);
  try {
    for (let i = 0; i < PAIR_LIMIT - 1; i++) await store.recordLoginFailure('127.0.0.1', 'bob', clock.now());
  } finally {
    await store.close();
  }
  const last = await bob('PATCH', `/admin/api/users/${bobId}`, { password: 'bob password 4', current_password: `guess ${PAIR_LIMIT - 1}` });
  t.equal(last.json.error.code, 'invalid_current_password', 'the last guess the limit allows is checked');
  const right = await bob('PATCH', `/admin/api/users/${bobId}`, { password: 'bob password 4', current_password: 'bob password 3' });
  t.equal(right.status, 429, 'refused once the limit is spent, even the right one');
  t.equal(right.json.error.code, 'too_many_attempts');
  t.ok(Number(right.headers.get('retry-after')) > 0);
  t.equal((await loginRequest(base, 'bob', 'bob password 3')).status, 429, 'and logins of that name from that address too');
  nextWindow();
  t.equal((await loginRequest(base, 'bob', 'bob password 3')).status, 200, 'nothing was changed');
});
