import path from 'node:path';
import t from 'tap';
// the module itself: auth/index.ts would load the password module before startApi sets its cost
import { SWEEP_EVERY, ThrottleSweep } from '../../src/auth/throttle-sweep.ts';
import { WINDOW_MS } from '../../src/store/throttle-rules.ts';
import { startApi } from '../helpers/api.ts';
import { fileClock } from '../helpers/clock.ts';
import { tempDir } from '../helpers/server.ts';
import { loginRequest } from './session-client.ts';

// The login throttle's sweep of stale counts runs in the background of an API worker
// (src/auth/throttle-sweep.ts): at each administrator login and every SWEEP_EVERY password
// checks, one at a time, never on a login's path. What it removes is the store contract's
// (test/store/contract.ts, both stores).

t.test('a sweep every SWEEP_EVERY checks, one at a time; a failure is reported, but not once the worker stops', async (t) => {
  const calls: number[] = [];
  let release: (ok: boolean) => void = () => undefined;
  const store = {
    sweepLoginThrottle: (at: number) => {
      calls.push(at);
      return new Promise<void>((resolve, reject) => {
        release = (ok) => (ok ? resolve() : reject(new Error('the disk is full')));
      });
    },
  };
  const errors: unknown[] = [];
  const sweep = new ThrottleSweep(store, (err) => errors.push(err));
  for (let i = 1; i < SWEEP_EVERY; i++) sweep.checked(i);
  t.same(calls, [], `none before the ${SWEEP_EVERY}th check`);
  sweep.checked(SWEEP_EVERY);
  t.same(calls, [SWEEP_EVERY], 'that check starts one, as of its time');
  for (let i = 1; i <= SWEEP_EVERY; i++) sweep.checked(1000 + i);
  sweep.start(5000);
  t.equal(calls.length, 1, 'none starts while one runs (neither the next round of checks nor a login)');
  t.ok(sweep.busy, 'it is running');
  release(false);
  await sweep.idle();
  t.equal(errors.length, 1, 'its failure is reported');
  t.notOk(sweep.busy, 'and has ended');
  sweep.start(6000);
  t.same(calls, [SWEEP_EVERY, 6000], 'the next one starts once it ended');
  sweep.stop();
  release(false);
  await sweep.idle();
  t.equal(errors.length, 1, 'a sweep failing after the stop (the store closing under it) is not reported');
  sweep.start(7000);
  for (let i = 0; i < SWEEP_EVERY; i++) sweep.checked(8000);
  t.equal(calls.length, 2, 'none starts once stopped');
});

t.test('through the service: a login is answered while its sweep runs, which then removes the stale counts', async (t) => {
  const dir = tempDir();
  const clock = fileClock(dir, '2026-05-04T10:00:00.000Z');
  const ADMIN = { username: 'root', password: 'correct horse battery' };
  const server = await startApi({
    dataDir: path.join(dir, 'data'),
    env: { CLOCK_FILE: clock.file, ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, TEST_PASSWORD_SCRYPT_N: String(2 ** 14) },
  });
  t.teardown(() => server.stop());
  const store = server.store;
  const now = clock.now();
  // a spray's leftovers, past their window, and one count still live
  for (let i = 0; i < 40; i++) await store.recordLoginFailure(`2001:db8:7:${i.toString(16)}::/64`, `ghost${i}`, now - WINDOW_MS - 1000);
  await store.recordLoginFailure('192.0.2.40', 'recent', now - 1000);

  // the store's sweep held until the test lets it go
  const sweepStore = store.sweepLoginThrottle.bind(store);
  const started: number[] = [];
  let letGo: () => void = () => undefined;
  store.sweepLoginThrottle = async (at: number) => {
    started.push(at);
    await new Promise<void>((resolve) => (letGo = resolve));
    await sweepStore(at);
  };

  const res = await loginRequest(server.baseUrl, ADMIN.username, ADMIN.password);
  t.equal(res.status, 200, 'the login is answered');
  t.same(started, [now], 'with its sweep started, as of the login, and still running');
  t.ok(server.throttleSweep.busy, 'the worker says so');
  t.ok((await store.readThrottle('2001:db8:7:0::/64', 'ghost0', now)).address, 'the stale counts are still there');
  letGo();
  await server.throttleSweep.idle();
  for (const i of [0, 39]) {
    const v = await store.readThrottle(`2001:db8:7:${i.toString(16)}::/64`, `ghost${i}`, now);
    t.same([v.address, v.pair, v.name], [undefined, undefined, undefined], `stale counts of network ${i} swept`);
  }
  t.equal((await store.readThrottle('192.0.2.40', 'recent', now)).address?.count, 1, 'the live count stays');

  // every SWEEP_EVERY password checks on this worker, whatever their answer (the login above
  // was one): wrong passwords, most refused 429 by the throttle, never hashed
  const statuses = new Set<number>();
  for (let i = 2; i < SWEEP_EVERY; i++) statuses.add((await loginRequest(server.baseUrl, 'nobody', 'wrong')).status);
  t.same([...statuses].sort(), [401, 429], 'wrong passwords, then refusals');
  t.equal(started.length, 1, `no sweep before the ${SWEEP_EVERY}th check`);
  const last = await loginRequest(server.baseUrl, 'nobody', 'wrong');
  t.equal(last.status, 429, 'the check that starts a sweep is answered as any other');
  t.equal(started.length, 2, 'a sweep started with it');
  letGo();
  await server.throttleSweep.idle();
});
