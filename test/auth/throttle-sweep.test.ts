import path from 'node:path';
import t from 'tap';
import { WINDOW_MS } from '../../src/store/throttle-rules.ts';
import { startApi } from '../helpers/api.ts';
import { fileClock } from '../helpers/clock.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { loginRequest } from './session-client.ts';

// The login throttle's stale counts are swept by the process on a clock (src/startup.ts,
// THROTTLE_SWEEP_MS), one sweep at a time, never by a login: no login waits for a sweep, and a
// spray's attempts, however many, start none. What a sweep removes is the store contract's
// (test/store/contract.ts, both stores). Through the service's app on the real store, in process.

const dir = tempDir();
const clock = fileClock(dir, '2026-05-04T10:00:00.000Z');
const ADMIN = { username: 'root', password: 'correct horse battery' };
// a sweep every 25 ms here, so that the test sees several periods pass
const server = await startApi({
  dataDir: path.join(dir, 'data'),
  env: { CLOCK_FILE: clock.file, ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TEST_PASSWORD_SCRYPT_N: String(2 ** 14) },
  throttleSweepMs: 25,
});
// the sweeps are a job of the main thread (src/startup.ts), on its handle
const store = server.mainStore;

// the store's sweep, counted, and held while `hold` is set
const sweepStore = store.sweepLoginThrottle.bind(store);
const started: number[] = [];
let hold: Promise<void> | null = null;
let letGo: () => void = () => undefined;
let failNext = false;
store.sweepLoginThrottle = async (at: number) => {
  started.push(at);
  if (hold) await hold;
  if (failNext) {
    failNext = false;
    throw new Error('the disk is full');
  }
  await sweepStore(at);
};
const holdSweeps = () => {
  hold = new Promise<void>((resolve) => (letGo = resolve));
};
const release = () => {
  hold = null;
  letGo();
};
// a sweep still held (a failed check above) is let go first: the stop waits for it
t.teardown(() => {
  release();
  return server.stop();
});

const net = (i: number) => `2001:db8:7:${i.toString(16)}::/64`;

t.test('the process sweeps the stale counts on its clock and keeps the live ones', async (t) => {
  const now = clock.now();
  for (let i = 0; i < 40; i++) await store.recordLoginFailure(net(i), `ghost${i}`, now - WINDOW_MS - 1000);
  await store.recordLoginFailure('192.0.2.40', 'recent', now - 1000);
  await waitFor(async () => (await store.readThrottle(net(39), 'ghost39', now)).address === undefined);
  for (const i of [0, 39]) {
    const v = await store.readThrottle(net(i), `ghost${i}`, now);
    t.same([v.address, v.pair, v.name], [undefined, undefined, undefined], `stale counts of network ${i} swept`);
  }
  t.equal((await store.readThrottle('192.0.2.40', 'recent', now)).address?.count, 1, 'the live count stays');
});

t.test('a login is answered while a sweep runs, and starts none; a spray of attempts starts none', async (t) => {
  holdSweeps();
  const before = started.length;
  await waitFor(() => started.length > before);
  const during = started.length;
  const res = await loginRequest(server.baseUrl, ADMIN.username, ADMIN.password);
  t.equal(res.status, 200, 'an administrator logs in while the sweep is held');
  const statuses = new Set<number>();
  for (let i = 0; i < 300; i++) statuses.add((await loginRequest(server.baseUrl, 'nobody', 'wrong')).status);
  t.same([...statuses].sort(), [401, 429], 'wrong passwords, then refusals, all answered');
  t.equal(started.length, during, 'no second sweep started meanwhile: one at a time, and none by the logins');
  release();
  await waitFor(() => started.length > during);
  t.pass('the sweeps go on once it ends');
});

t.test('a sweep that fails is logged, and the next one runs', async (t) => {
  const logged = () => server.logLines().filter((l) => l.msg === 'login throttle sweep failed; the next one tries again').length;
  const before = logged();
  failNext = true;
  await waitFor(() => logged() > before);
  const now = clock.now();
  await store.recordLoginFailure(net(100), 'late', now - WINDOW_MS);
  await waitFor(async () => (await store.readThrottle(net(100), 'late', now)).address === undefined);
  t.pass('a count gone stale was swept by a later run');
});
