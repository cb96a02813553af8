import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { bootstrapAdmin } from '../../src/admin/index.ts';
import { probePort } from '../../src/cluster/index.ts';
import { ConfigError, loadConfig } from '../../src/config/index.ts';
import { loadUws } from '../../src/http/index.ts';
import type { Logger } from '../../src/observability/index.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { openConfiguredStore, privateDataDir, StoreError } from '../../src/store/index.ts';
import { checkBeforeOpen } from '../../src/store/lmdb/open.ts';
import { makeToken, ROOT, runServiceToExit, startServer, tempDir } from '../helpers/server.ts';
import { settledState, waitFor } from '../helpers/wait.ts';

// One server serves the tests that need a running one (the SO_REUSEPORT port, the CLI beside
// it, then the SIGTERM drain, which ends it) and leaves its DATA_DIR to the admin bootstrap
// test: a start costs seconds of TypeScript loading and model warm-up on a loaded 2-core host.
// It starts while the refused starts below run.
const BOOT_ADMIN = { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'first-password' };
const starting = startServer({ ready: true, env: { ...BOOT_ADMIN, TEST_INFERENCE_DELAY_MS: '4000' } });
starting.catch(() => undefined); // awaited (and failing) in the tests that use it
t.teardown(async () => (await starting.catch(() => undefined))?.stop());

t.test('bad configuration values are refused with a message naming the variable', async (t) => {
  // each value against the configuration loader main() runs first (in process: a refused
  // start costs a process start-up and exits before anything else runs)...
  for (const [k, v] of [['PORT', 'eighty'], ['WORKERS', '0'], ['COOKIE_SECURE', 'maybe'], ['INFERENCE_BACKEND', 'cuda'], ['LOG_LEVEL', 'loud']]) {
    t.throws(() => loadConfig({ WORKERS: '1', [k!]: v! }, ROOT, 2), new RegExp(k!), `${k} refused, the message names it`);
  }
  t.throws(() => loadConfig({ ADMIN_USERNAME: 'root' }, ROOT, 2), /ADMIN_USERNAME and ADMIN_PASSWORD/);
  // ...and what main() does with the refusal (the message on stderr, exit 2: one catch in
  // src/main.ts for loadConfig's errors and checkTls's) is a real start in
  // test/http/tls.test.ts, refused for a wrong passphrase (issue 43: a refused start fewer here)
});

// The port check (probePort, what main() runs before the API workers start), in process against
// a port a plain listener holds; the refusal through the process (ConfigError: the fatal line,
// the message, exit 1) is the SO_REUSEPORT case below, on the same check. That ran as a start of
// its own, which started the engine before it was refused; issue 43: a process fewer.
t.test('a port held by another program is an error, not a silent success', async (t) => {
  const other = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => other.once('listening', r));
  const port = (other.address() as net.AddressInfo).port;
  try {
    const probed = probePort(loadUws(), loadConfig({ HOST: '127.0.0.1', PORT: String(port), WORKERS: '1' }, ROOT, 2));
    const e = await probed.then(() => null, (err: unknown) => err);
    t.ok(e instanceof ConfigError, `a ConfigError, which main() turns into exit 1 with its message: ${String(e)}`);
    t.match((e as Error | null)?.message, new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: address in use`));
  } finally {
    other.close();
  }
});

// The store's refusal, in process: what main() opens (openConfiguredStore) throws a StoreError
// naming the version, and main() turns a StoreError, like the ConfigError of a held port above,
// into the fatal line, the message on stderr and exit 1 (one branch: src/main.ts). That ran as a
// start of its own; issue 43: a process fewer.
t.test('a store of another schema version is refused', async (t) => {
  const dataDir = tempDir();
  const db = lmdbOpen(dataDir);
  await db.meta.put('schema_version', 999);
  await db.close();
  const opened = openConfiguredStore(loadConfig({ DATA_DIR: dataDir, WORKERS: '1' }, ROOT, 2));
  const e = await opened.then(async (store) => {
    await store.close();
    return null;
  }, (err: unknown) => err);
  t.ok(e instanceof StoreError, `a StoreError, which main() turns into exit 1 with its message: ${String(e)}`);
  t.match((e as Error | null)?.message, /schema version 999/);
});

// A DATA_DIR that cannot be used is one line naming it, never a stack (ConfigError or
// StoreError: main() prints the message and exits 1); what LMDB would crash on without a word
// (SIGSEGV: a data.mdb that is not LMDB, a map over the address-space limit) is refused first.
t.test('an unusable DATA_DIR, a foreign data.mdb and a map past ulimit -v are refused with one line, not a stack or a crash', async (t) => {
  for (const name of ['DATA_DIR', 'MODELS_DIR', 'HOST']) {
    t.throws(() => loadConfig({ WORKERS: '1', [name]: ' /srv/x' }, ROOT, 2), new RegExp(`${name} has spaces at its start or end`), `${name} with a leading space`);
    t.throws(() => loadConfig({ WORKERS: '1', [name]: '/srv/x ' }, ROOT, 2), new RegExp(`${name} has spaces`), `${name} with a trailing space`);
  }
  const dir = tempDir();
  fs.writeFileSync(path.join(dir, 'file'), 'x');
  const refusal = (dataDir: string) => {
    try {
      privateDataDir(dataDir);
      return null;
    } catch (err) {
      return err;
    }
  };
  for (const [where, why] of [[path.join(dir, 'file'), /^DATA_DIR .*file cannot be used: it is not a folder/], [path.join(dir, 'file', 'sub'), /^DATA_DIR .*cannot be used: ENOTDIR/]] as const) {
    const err = refusal(where);
    t.ok(err instanceof ConfigError, `a ConfigError, which main() turns into its message and exit 1: ${String(err)}`);
    t.match((err as Error | null)?.message, why);
  }
  const foreign = path.join(dir, 'foreign');
  fs.mkdirSync(path.join(foreign, 'store'), { recursive: true });
  fs.writeFileSync(path.join(foreign, 'store', 'data.mdb'), Buffer.alloc(65_536, 'x'));
  const e = await openConfiguredStore(loadConfig({ DATA_DIR: foreign, WORKERS: '1' }, ROOT, 2)).then(async (s) => {
    await s.close();
    return null;
  }, (err: unknown) => err);
  t.ok(e instanceof StoreError, `a StoreError, not a SIGSEGV: ${String(e)}`);
  t.match((e as Error | null)?.message, /data\.mdb is not an LMDB store/);
  const GiB = 1024 ** 3;
  t.throws(() => checkBeforeOpen(path.join(dir, 'none'), 1024 * GiB, 15 * GiB), { message: /LMDB map of 1024 GiB \(LMDB_MAP_SIZE_GIB\) does not fit this process's address-space limit of 15\.0 GiB/ });
  t.doesNotThrow(() => checkBeforeOpen(path.join(dir, 'none'), 4 * GiB, 15 * GiB), 'a map that fits');
  t.doesNotThrow(() => checkBeforeOpen(path.join(dir, 'none'), 1024 * GiB, null), 'no limit');
});

t.test('a port held by another uWS-style SO_REUSEPORT listener is refused too', async (t) => {
  const first = await starting;
  const r = await runServiceToExit({ PORT: String(first.port) });
  t.equal(r.code, 1);
  t.match(r.out, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${first.port}: address in use`));
  t.notMatch(r.out, /\n\s+at /, 'its message, no stack trace (the branch every start-up ConfigError takes)');
});

t.test('the CLI works on the DATA_DIR of a running server', async (t) => {
  const s = await starting;
  const created = await s.cli(['user', 'create', 'ops', '--role', 'admin'], 'a-long-password\n');
  t.equal(created.code, 0, created.stderr);
  t.equal(created.json.username, 'ops');
  t.notOk('password_hash' in created.json);
  // independent of each other (none of them changes what another reads): run side by side
  const [dup, short, usage, list] = await Promise.all([
    s.cli(['user', 'create', 'ops'], 'a-long-password\n'),
    s.cli(['user', 'create', 'x'], 'short\n'),
    s.cli(['usage']),
    s.cli(['user', 'list']),
  ]);
  t.equal(dup.code, 4, 'a taken name is a conflict');
  t.equal(short.code, 2, 'a short password is a usage error');
  t.match(short.stderr, /must have 8 to 1024 characters/);
  t.equal(usage.code, 0);
  t.same(usage.json, { tokens: [] });
  // the server was started with ADMIN_USERNAME/ADMIN_PASSWORD: its bootstrapped admin is
  // listed beside the one made here, once
  t.equal(list.code, 0, list.stderr);
  const users = list.json.users as any[];
  t.same(users.map((u) => u.username).sort(), ['ops', 'root'], 'the bootstrapped admin once, and the CLI-made one');
  t.match(users.find((u) => u.username === 'root'), { username: 'root', role: 'admin', enabled: true });
  t.notOk(users.some((u) => 'password_hash' in u), 'no hash in the list');
});

t.test('SIGTERM drains: in-flight calls finish, new connections are refused, exit 0', async (t) => {
  const s = await starting;
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

// The server above was started on its DATA_DIR with ADMIN_USERNAME=root (it is stopped now): it
// created that admin at its start. A later start with another ADMIN_PASSWORD finds the name
// taken and changes nothing: that start's bootstrap (src/admin/bootstrap.ts, what src/main.ts
// runs before any API worker starts) is run here in process on the same store, as a second
// server start ran it before (issue 43: a start fewer).
t.test('admin bootstrap creates the admin once and never overwrites it', async (t) => {
  const s1 = await starting;
  await s1.stop();
  const dataDir = s1.dataDir;
  t.ok(s1.logLines().some((l) => l.msg === 'admin bootstrap: admin user created'), 'the first start created it');
  const db = lmdbOpen(dataDir);
  const roots1 = [...db.users.getRange({})].map((e) => e.value).filter((u) => u.username === 'root');
  await db.close();
  t.equal(roots1.length, 1, 'created once');
  t.match(roots1[0], { username: 'root', role: 'admin', enabled: true });
  const hash1 = roots1[0]!.password_hash;
  const config = loadConfig({ DATA_DIR: dataDir, ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'second-password', WORKERS: '1' }, ROOT, 2);
  const store = LmdbBackend.open(dataDir);
  const logged: string[] = [];
  try {
    await bootstrapAdmin(store, config, { info: (_: unknown, msg: string) => void logged.push(msg) } as unknown as Logger);
  } finally {
    await store.close();
  }
  const db2 = lmdbOpen(dataDir);
  const roots2 = [...db2.users.getRange({})].map((e) => e.value).filter((u) => u.username === 'root');
  await db2.close();
  t.equal(roots2.length, 1, 'not created again');
  t.equal(roots2[0]!.password_hash, hash1, 'password unchanged');
  t.ok(logged.some((msg) => /user exists/.test(msg)));
});

// Issue 39: a start that never finished printed nothing, for ever. The start-up watchdog names
// the step it is waiting for and exits 1 (the main thread still runs), and its backstop thread
// does the same and kills the process when the main thread itself is stuck (as in that hang:
// a thread waiting on a mutex it held). TEST_START_HOLD holds start-up at the named step.
t.test('a start that does not finish is ended by the watchdog, with the step it waits for', async (t) => {
  const [waiting, blocked] = await Promise.all([
    runServiceToExit({ START_TIMEOUT_SECONDS: '10', TEST_START_HOLD: 'administrator bootstrap' }),
    runServiceToExit({ START_TIMEOUT_SECONDS: '10', TEST_START_HOLD: 'administrator bootstrap:block' }),
  ]);
  const fatal = (out: string) => out.split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l)];
    } catch {
      return [];
    }
  }).find((l) => l.level === 60);
  t.equal(waiting.code, 1, `exit 1 when the main thread waits:\n${waiting.out}`);
  t.match(fatal(waiting.out), { thread: 'main', waiting_for: 'the administrator bootstrap', START_TIMEOUT_SECONDS: 10 }, 'the fatal line names the step');
  t.match(waiting.out, /start-up did not finish within 10 s: still waiting for the administrator bootstrap/, 'and so does stderr');
  t.equal(blocked.signal, 'SIGKILL', `killed by the backstop when the main thread is blocked:\n${blocked.out}`);
  t.match(fatal(blocked.out), { thread: 'start-watchdog', waiting_for: 'the administrator bootstrap', START_TIMEOUT_SECONDS: 10 }, 'the backstop names the step');
  t.match(blocked.out, /the main thread does not answer: still waiting for the administrator bootstrap/);
});

t.test('START_TIMEOUT_SECONDS is checked like every other variable', async (t) => {
  t.throws(() => loadConfig({ WORKERS: '1', START_TIMEOUT_SECONDS: 'soon' }, ROOT, 2), /START_TIMEOUT_SECONDS/);
  t.equal(loadConfig({ WORKERS: '1' }, ROOT, 2).START_TIMEOUT_SECONDS, 300, 'five minutes by default');
  t.equal(loadConfig({ WORKERS: '1', START_TIMEOUT_SECONDS: '0' }, ROOT, 2).START_TIMEOUT_SECONDS, 0, '0 turns it off');
});
