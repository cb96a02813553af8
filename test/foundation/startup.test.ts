import net from 'node:net';
import { spawn } from 'node:child_process';
import t from 'tap';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken, ROOT, runCli, startServer, tempDir } from '../helpers/server.ts';
import { settledState, waitFor } from '../helpers/wait.ts';

function runMain(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env: { ...process.env, DATA_DIR: tempDir(), WORKERS: '1', ...env } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    // hang detector only: a refused configuration exits at once, but loading tsx and the
    // modules can take well over 30 s on a loaded shared machine
    const timer = setTimeout(() => p.kill('SIGKILL'), 120_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

t.test('bad configuration values are refused with a message naming the variable', async (t) => {
  for (const [k, v] of [['PORT', 'eighty'], ['WORKERS', '0'], ['COOKIE_SECURE', 'maybe'], ['INFERENCE_BACKEND', 'cuda'], ['LOG_LEVEL', 'loud']]) {
    const r = await runMain({ [k!]: v! });
    t.equal(r.code, 2, `${k} refused`);
    t.match(r.out, new RegExp(k!), `message names ${k}`);
  }
  const r = await runMain({ ADMIN_USERNAME: 'root' });
  t.equal(r.code, 2);
  t.match(r.out, /ADMIN_USERNAME and ADMIN_PASSWORD/);
});

t.test('a port held by another program is an error, not a silent success', async (t) => {
  const other = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => other.once('listening', r));
  const port = (other.address() as net.AddressInfo).port;
  const r = await runMain({ PORT: String(port) });
  other.close();
  t.equal(r.code, 1);
  t.match(r.out, /cannot listen on 127\.0\.0\.1:\d+/);
});

t.test('a port held by another uWS-style SO_REUSEPORT listener is refused too', async (t) => {
  const first = await startServer();
  t.teardown(() => first.stop());
  const r = await runMain({ PORT: String(first.port) });
  t.equal(r.code, 1);
  t.match(r.out, /address in use/);
});

t.test('SIGTERM drains: in-flight calls finish, new connections are refused, exit 0', async (t) => {
  const s = await startServer({ ready: true, env: { TEST_INFERENCE_DELAY_MS: '4000' } });
  t.equal((await fetch(`${s.baseUrl}/health/live`)).status, 200);
  const { token } = await makeToken(s, ['rgb_liveness:5:day']);
  const inflight = postVerify(s.baseUrl, token, 'rgb_liveness', request([single()]));
  const inflightState = settledState(inflight);
  // in flight = its unit is reserved (inference, delayed 4 s, runs after the reservation)
  await waitFor(async () => (await (await fetch(`${s.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json()).usage[0].used === 1, { what: 'the verify call to be in flight' });
  const stopped = s.stop('SIGTERM');
  const connect = () => new Promise<'accepted' | 'refused'>((resolve) => {
    const sock = net.connect(s.port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve('accepted');
    });
    sock.once('error', () => resolve('refused'));
  });
  // the drain closes the listen sockets soon after the signal: poll until a connect is refused
  const late = await waitFor(async () => ((await connect()) === 'refused' ? 'refused' : undefined), { timeoutMs: 15_000, what: 'new connections to be refused' }).catch(() => 'accepted');
  t.equal(late, 'refused', 'listen sockets closed while draining');
  t.notOk(inflightState.settled, 'and the in-flight call was still running when they closed');
  const done = await inflight;
  t.equal(done.status, 200, 'the in-flight verify finished');
  t.equal(done.json.charged_units, 1);
  const code = await stopped;
  t.equal(code, 0);
  t.ok(s.logLines().some((l) => l.msg === 'draining'));
  t.ok(s.logLines().some((l) => l.msg === 'stopped'));
});

t.test('admin bootstrap creates the admin once and never overwrites it', async (t) => {
  const dataDir = tempDir();
  const s1 = await startServer({ dataDir, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'first-password' } });
  await s1.stop();
  const users1 = (await runCli(dataDir, ['user', 'list'])).json.users;
  t.equal(users1.length, 1);
  t.match(users1[0], { username: 'root', role: 'admin', enabled: true });
  const db = lmdbOpen(dataDir);
  const hash1 = [...db.users.getRange({})][0]!.value.password_hash;
  await db.close();
  const s2 = await startServer({ dataDir, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'second-password' } });
  await s2.stop();
  const db2 = lmdbOpen(dataDir);
  t.equal([...db2.users.getRange({})][0]!.value.password_hash, hash1, 'password unchanged');
  await db2.close();
  t.ok(s2.logLines().some((l) => /user exists/.test(l.msg)));
});

t.test('a store of another schema version is refused', async (t) => {
  const dataDir = tempDir();
  const db = lmdbOpen(dataDir);
  await db.meta.put('schema_version', 999);
  await db.close();
  const r = await runMain({ DATA_DIR: dataDir });
  t.equal(r.code, 1);
  t.match(r.out, /schema version 999/);
});

t.test('the CLI works on the DATA_DIR of a running server', async (t) => {
  const s = await startServer();
  t.teardown(() => s.stop());
  const created = await s.cli(['user', 'create', 'ops', '--role', 'admin'], 'a-long-password\n');
  t.equal(created.code, 0, created.stderr);
  t.equal(created.json.username, 'ops');
  t.notOk('password_hash' in created.json);
  const dup = await s.cli(['user', 'create', 'ops'], 'a-long-password\n');
  t.equal(dup.code, 4, 'a taken name is a conflict');
  const short = await s.cli(['user', 'create', 'x'], 'short\n');
  t.equal(short.code, 2, 'a short password is a usage error');
  t.match(short.stderr, /at least 8/);
  const usage = await s.cli(['usage']);
  t.equal(usage.code, 0);
  t.same(usage.json, { tokens: [] });
});
