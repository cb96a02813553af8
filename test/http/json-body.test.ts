import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { login } from '../auth/session-client.ts';

// The JSON bodies of the console's API and the login (src/http/body.ts), in process: bytes that
// are not UTF-8 are refused 422 like any malformed JSON (they were decoded leniently: invalid
// bytes became U+FFFD, so a token name was stored otherwise than sent and two different
// passwords became one), and a client that leaves mid-body is a client that left
// (client_disconnected, status 499), not an unexpected failure logged at error level with a
// stack, which anyone could produce at will.

const ADMIN = { username: 'root', password: 'correct horse battery' };
const server = await startApi({
  dataDir: path.join(tempDir(), 'data'),
  env: { ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TEST_PASSWORD_SCRYPT_N: String(2 ** 10) },
});
t.teardown(() => server.stop());
const base = server.baseUrl;

const bytes = (...parts: (string | number[])[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

t.test('a JSON body that is not UTF-8: 422 json_invalid, nothing written', async (t) => {
  const s = await login(base, ADMIN.username, ADMIN.password);
  const headers = { 'content-type': 'application/json', cookie: s.cookie, 'x-csrf-token': s.csrf };
  const token = await fetch(`${base}/admin/api/tokens`, { method: 'POST', headers, body: bytes('{"name":"kiosk-', [0xff, 0xc0, 0x80], '","grants":[]}') });
  t.equal(token.status, 422);
  t.match(await token.json(), { detail: [{ loc: ['body'], msg: 'JSON decode error: the body is not valid UTF-8', type: 'json_invalid' }] });
  const listed = await (await fetch(`${base}/admin/api/tokens`, { headers })).json();
  t.notOk(JSON.stringify(listed).includes('kiosk-'), 'no token made');

  const user = await fetch(`${base}/admin/api/users`, {
    method: 'POST', headers, body: bytes('{"username":"second","password":"pass-', [0xff, 0xfe], '-word","role":"admin","current_password":', JSON.stringify(ADMIN.password), '}'),
  });
  t.equal(user.status, 422, 'a password of other bytes than UTF-8 is refused, not turned into U+FFFD');
  const loginBad = await fetch(`${base}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bytes('{"username":"root","password":"', [0xed, 0xa0, 0x80], '"}') });
  t.equal(loginBad.status, 422, 'an encoded surrogate (not UTF-8) in a login');
  t.match(await loginBad.json(), { detail: [{ type: 'json_invalid' }] });

  // what UTF-8 allows is read as before: a name with an emoji; a BOM stays refused, as JSON.parse refused it
  const emoji = await fetch(`${base}/admin/api/tokens`, { method: 'POST', headers, body: bytes('{"name":"kiosk \u{1F600}","grants":[]}') });
  t.equal(emoji.status, 201);
  t.equal((await emoji.json()).name, 'kiosk \u{1F600}');
  const bom = await fetch(`${base}/admin/api/tokens`, { method: 'POST', headers, body: bytes([0xef, 0xbb, 0xbf], '{"name":"bom","grants":[]}') });
  t.equal(bom.status, 422);
});

t.test('a client that leaves mid-body: logged as client_disconnected (499), no failure', async (t) => {
  const before = server.logLines().length;
  await new Promise<void>((resolve, reject) => {
    const c = net.connect(server.port, '127.0.0.1', () => {
      c.write('POST /auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"username":"ro');
      // gone once the service has the head and the first bytes: its answer would be the next thing
      setImmediate(() => c.destroy());
    });
    c.on('error', reject);
    c.on('close', () => resolve());
  });
  const line = await waitFor(() => server.logLines().slice(before).find((l) => l.msg === 'request' && l.route === '/auth/login'));
  t.match(line, { status: 499, code: 'client_disconnected' });
  t.same(server.logLines().slice(before).filter((l) => l.level >= 50), [], 'nothing logged as an error');
  t.equal((await fetch(`${base}/health/live`)).status, 200);
});
