import path from 'node:path';
import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { client, login, loginRequest } from '../auth/session-client.ts';

// Review 3, F2: the OpenAPI document's minLength/maxLength count Unicode code points (JSON
// Schema's definition, and the spec's "characters"); the JSON bodies were checked in UTF-16
// units, so a character outside the BMP (an emoji: a surrogate pair) counted twice, and the
// 422 that followed was an opaque model_type at ["body"]. Every length here is in code points,
// and a refusal names its field as FastAPI would (string_too_long / string_too_short).
const dir = tempDir();
const server = await startApi({ dataDir: path.join(dir, 'data'), env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery', TEST_PASSWORD_SCRYPT_N: '1024' } });
t.teardown(() => server.stop());
const base = server.baseUrl;
const admin = client(base, await login(base, 'root', 'correct horse battery'));

const EMOJI = '\u{1F600}'; // one character, two UTF-16 units

t.test('token name: 101 emoji (202 UTF-16 units) are 101 characters, under maxLength 200', async (t) => {
  const name = EMOJI.repeat(101);
  const r = await admin('POST', '/admin/api/tokens', { name, grants: [] });
  t.equal(r.status, 201, JSON.stringify(r.json));
  t.equal(r.json.name, name);

  const renamed = '\u{1F642}'.repeat(200);
  const p = await admin('PATCH', `/admin/api/tokens/${r.json.id}`, { name: renamed });
  t.equal(p.status, 200, `PATCH: 200 characters is the limit (${JSON.stringify(p.json)})`);
  t.equal(p.json.name, renamed);

  const over = await admin('PATCH', `/admin/api/tokens/${r.json.id}`, { name: '\u{1F643}'.repeat(201) });
  t.equal(over.status, 422);
  t.match(over.json.detail, [{ loc: ['body', 'name'], type: 'string_too_long', ctx: { max_length: 200, actual_length: 201 } }]);
  t.equal(over.json.detail.length, 1);

  const created = await admin('POST', '/admin/api/tokens', { name: '\u{1F643}'.repeat(201), grants: [] });
  t.equal(created.status, 422);
  t.match(created.json.detail, [{ loc: ['body', 'name'], type: 'string_too_long', ctx: { max_length: 200 } }]);
});

t.test('password: 8 to 1,024 characters, in code points', async (t) => {
  const long = '\u{1F511}'.repeat(600);
  const r = await admin('POST', '/admin/api/users', { username: 'emo600', password: long, role: 'user' });
  t.equal(r.status, 201, `600 characters (1,200 UTF-16 units) (${JSON.stringify(r.json)})`);
  const back = await loginRequest(base, 'emo600', long);
  t.equal((await back.json()).error?.code, 'login_disabled', 'and the login takes it (maxLength 1,024): the password is right, a user role has no console');

  const four = await admin('POST', '/admin/api/users', { username: 'emo4', password: '\u{1F510}'.repeat(4), role: 'user' });
  t.equal(four.status, 422, '4 characters (8 UTF-16 units) are under the minimum of 8');
  t.same(four.json.detail, [{ loc: ['body', 'password'], msg: 'String should have at least 8 characters', type: 'string_too_short', ctx: { min_length: 8 } }], 'the password is named, never echoed');

  const over = await admin('POST', '/admin/api/users', { username: 'emo1025', password: '\u{1F511}'.repeat(1025), role: 'user' });
  t.equal(over.status, 422);
  t.same(over.json.detail, [{ loc: ['body', 'password'], msg: 'String should have at most 1024 characters, not 1025', type: 'string_too_long', ctx: { max_length: 1024, actual_length: 1025 } }]);

  const user = (await admin('GET', '/admin/api/users')).json.users.find((u: { username: string }) => u.username === 'emo600');
  const patched = await admin('PATCH', `/admin/api/users/${user.id}`, { password: '\u{1F510}'.repeat(4), current_password: 'correct horse battery' });
  t.equal(patched.status, 422, 'PATCH counts the same');
  t.match(patched.json.detail, [{ loc: ['body', 'password'], type: 'string_too_short' }]);
  t.equal(patched.json.detail.length, 1);
});

t.test('login: username of at most 64 characters, in code points', async (t) => {
  const ok = await loginRequest(base, '\u{1F600}'.repeat(64), 'whatever-password');
  t.equal(ok.status, 401, '64 characters (128 UTF-16 units) are a well-formed login that names no user');
  const over = await loginRequest(base, '\u{1F600}'.repeat(65), 'whatever-password');
  t.equal(over.status, 422);
  t.match((await over.json()).detail, [{ loc: ['body', 'username'], type: 'string_too_long', ctx: { max_length: 64, actual_length: 65 } }]);
});

t.test('CLI: token create --name and user create count as the API does', async (t) => {
  const named = await server.cli(['token', 'create', '--name', '\u{1F642}'.repeat(101)]);
  t.equal(named.code, 0, named.stderr);
  const long = await server.cli(['user', 'create', 'cli600', '--role', 'user'], `${'\u{1F511}'.repeat(600)}\n`);
  t.equal(long.code, 0, `600 characters (${long.stderr})`);
  const short = await server.cli(['user', 'create', 'cli4', '--role', 'user'], `${'\u{1F510}'.repeat(4)}\n`);
  t.not(short.code, 0, '4 characters are too few');
  t.match(short.stderr, /8 to 1024 characters/);
});
