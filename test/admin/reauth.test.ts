import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { client, login, loginRequest } from '../auth/session-client.ts';

// Security issue 40, finding 3: with a stolen console session (cookie and CSRF token) an
// attacker made an admin of their own and disabled the other admin. Giving or taking admin
// access now needs the acting operator's current password (current_password, as a password
// change already did): over real HTTP against the service's app and real store, in process
// (test/helpers/api.ts; was one server start).
const ROOT_PASSWORD = 'correct horse battery';
// scrypt at the test-only N=2^10: this test counts refusals, not hash cost
const server = await startApi({ env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: ROOT_PASSWORD, TEST_PASSWORD_SCRYPT_N: '1024' } });
t.teardown(() => server.stop());
const base = server.baseUrl;
const root = client(base, await login(base, 'root', ROOT_PASSWORD));
const userId = async (name: string) => ((await root('GET', '/admin/api/users')).json.users as { id: string; username: string }[]).find((u) => u.username === name)!.id;
const loginCode = async (name: string, password: string) => (await (await loginRequest(base, name, password)).json()).error?.code;
const missing = (r: { status: number; json: any }) => r.status === 422 && r.json.detail?.[0]?.type === 'missing' && r.json.detail[0].loc.join('.') === 'body.current_password';

// a second, legitimate admin (made with the password) whose session the attacker wants gone
const made = await root('POST', '/admin/api/users', { username: 'carol', password: 'carol password', role: 'admin', current_password: ROOT_PASSWORD });
const carolId = made.json.id as string;
const carol = client(base, await login(base, 'carol', 'carol password'));
// (asserted after the last await of the set-up: tap ends a root test that goes idle after one)
t.equal(made.status, 201, 'with the acting operator\'s password an admin is made');

t.test('a session alone (cookie + CSRF) cannot give or take admin access', async (t) => {
  const create = await root('POST', '/admin/api/users', { username: 'mallory', password: 'mallory password', role: 'admin' });
  t.ok(missing(create), `creating an admin: 422 current_password missing (got ${create.status})`);
  const wrongCreate = await root('POST', '/admin/api/users', { username: 'mallory', password: 'mallory password', role: 'admin', current_password: 'a guess' });
  t.equal(wrongCreate.status, 403);
  t.equal(wrongCreate.json.error.code, 'invalid_current_password');
  t.equal((await loginRequest(base, 'mallory', 'mallory password')).status, 401, 'no admin was made');

  const disable = await root('PATCH', `/admin/api/users/${carolId}`, { enabled: false });
  t.ok(missing(disable), 'disabling an admin: 422');
  const demote = await root('PATCH', `/admin/api/users/${carolId}`, { role: 'user' });
  t.ok(missing(demote), 'demoting an admin: 422');
  const wrong = await root('PATCH', `/admin/api/users/${carolId}`, { enabled: false, current_password: 'a guess' });
  t.equal(wrong.json.error.code, 'invalid_current_password', 'a wrong password: 403');
  t.equal((await carol('GET', '/auth/session')).json.role, 'admin', 'carol is still an admin, her session alive');

  // a role-user account cannot log in: making one gives no access and needs no password
  const plain = await root('POST', '/admin/api/users', { username: 'viewer', password: 'viewer password', role: 'user' });
  t.equal(plain.status, 201);
  const promote = await root('PATCH', `/admin/api/users/${plain.json.id}`, { role: 'admin' });
  t.ok(missing(promote), 'promoting a user: 422');
  t.equal(await loginCode('viewer', 'viewer password'), 'login_disabled', 'still a user');
  t.equal((await root('PATCH', `/admin/api/users/${plain.json.id}`, { enabled: false })).status, 200, 'disabling a role-user account needs none');
  t.equal((await root('PATCH', `/admin/api/users/${carolId}`, { enabled: true })).status, 200, 'a change that changes nothing needs none');
  t.notOk(server.logLines().some((l) => l.msg === 'operator account changed' && l.target === 'mallory'), 'nothing refused is logged as a change');
});

t.test('with the acting operator\'s password each passes, and is logged with who and from where', async (t) => {
  t.equal((await root('PATCH', `/admin/api/users/${carolId}`, { enabled: false, current_password: ROOT_PASSWORD })).status, 200);
  t.equal((await carol('GET', '/auth/session')).status, 401, 'the disabled admin\'s session ends');
  t.equal((await root('PATCH', `/admin/api/users/${carolId}`, { enabled: true })).status !== 200, true, 'enabling an admin needs it too');
  t.equal((await root('PATCH', `/admin/api/users/${carolId}`, { enabled: true, current_password: ROOT_PASSWORD })).status, 200);
  t.equal((await root('PATCH', `/admin/api/users/${carolId}`, { role: 'user', current_password: ROOT_PASSWORD })).status, 200);
  t.equal(await loginCode('carol', 'carol password'), 'login_disabled', 'demoted');
  const viewer = await userId('viewer');
  t.equal((await root('PATCH', `/admin/api/users/${viewer}`, { role: 'admin', enabled: true, current_password: ROOT_PASSWORD })).status, 200);
  t.equal((await loginRequest(base, 'viewer', 'viewer password')).status, 200, 'promoted and enabled');

  const changes = server.logLines().filter((l) => l.msg === 'operator account changed');
  const of = (target: string) => changes.filter((l) => l.target === target).map((l) => l.changes.join('+'));
  t.same(of('carol'), ['admin_created', 'admin_disabled', 'admin_enabled', 'admin_demoted']);
  t.same(of('viewer'), ['user_created', 'admin_promoted+admin_enabled']);
  t.ok(changes.every((l) => l.actor === 'root' && l.client_address === '127.0.0.1' && typeof l.request_id === 'string'), 'who and from where');
  t.notOk(JSON.stringify(changes).includes(ROOT_PASSWORD), 'never the password');
});

t.test('the OpenAPI description says so', async (t) => {
  const doc = await (await fetch(`${base}/openapi.json`)).json();
  t.ok(doc.components.schemas.UserCreate.properties.current_password, 'UserCreate takes current_password');
  t.match(doc.components.schemas.UserPatch.properties.current_password.description, /admin access/);
  const create = doc.paths['/admin/api/users'].post;
  t.ok(create.responses['403'] && create.responses['429'] && create.responses['422'], 'creating a user lists 403, 422 and 429');
  t.match(create.description, /current_password/);
  t.match(doc.paths['/admin/api/users/{id}'].patch.description, /demoting, disabling or enabling an admin/);
});
