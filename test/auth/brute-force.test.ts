import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startServer, tempDir } from '../helpers/server.ts';
import { loginRequest } from './session-client.ts';

// Failed logins are counted per username (5) and per address (20) in LMDB, across the two
// API workers of the server, in a 15-minute window.
const dir = tempDir();
const clock = path.join(dir, 'clock');
let at = Date.parse('2026-05-04T10:00:00.000Z');
const setClock = (ms: number) => {
  at = ms;
  fs.writeFileSync(clock, new Date(ms).toISOString());
};
setClock(at);
const server = await startServer({ dataDir: path.join(dir, 'data'), env: { CLOCK_FILE: clock, ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' } });
t.teardown(() => server.stop());
const base = server.baseUrl;

t.test('five wrong passwords lock the username: 429 with Retry-After, even for the right one', async (t) => {
  for (let i = 0; i < 5; i++) {
    const r = await loginRequest(base, 'root', `guess ${i}`);
    t.equal(r.status, 401, `guess ${i}`);
  }
  const locked = await loginRequest(base, 'root', 'correct horse battery');
  t.equal(locked.status, 429);
  t.equal((await locked.json()).error.code, 'too_many_attempts');
  t.equal(locked.headers.get('retry-after'), String(15 * 60));
  t.equal(locked.headers.get('set-cookie'), null);
  const other = await loginRequest(base, 'ROOT', 'anything');
  t.equal(other.status, 429, 'the lock ignores case');

  setClock(at + 5 * 60_000);
  const later = await loginRequest(base, 'root', 'correct horse battery');
  t.equal(later.status, 429);
  t.equal(later.headers.get('retry-after'), String(10 * 60), 'Retry-After counts down');

  setClock(at + 10 * 60_000);
  t.equal((await loginRequest(base, 'root', 'correct horse battery')).status, 200, 'open again once the window ends');
});

t.test('a success clears the username count', async (t) => {
  setClock(at + 16 * 60_000);
  for (let i = 0; i < 4; i++) await loginRequest(base, 'root', `guess ${i}`);
  t.equal((await loginRequest(base, 'root', 'correct horse battery')).status, 200);
  for (let i = 0; i < 4; i++) t.equal((await loginRequest(base, 'root', `again ${i}`)).status, 401);
  t.equal((await loginRequest(base, 'root', 'correct horse battery')).status, 200);
});

t.test('twenty failures from one address lock every username from it', async (t) => {
  setClock(at + 16 * 60_000);
  for (let i = 0; i < 20; i++) {
    const r = await loginRequest(base, `spray${i}`, 'password1');
    t.equal(r.status, 401);
  }
  const r = await loginRequest(base, 'root', 'correct horse battery');
  t.equal(r.status, 429);
  t.ok(Number(r.headers.get('retry-after')) > 0);
  setClock(at + 16 * 60_000);
  t.equal((await loginRequest(base, 'root', 'correct horse battery')).status, 200);
});
