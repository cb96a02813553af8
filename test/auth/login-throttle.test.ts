import t from 'tap';
import { ADDRESS_LIMIT, lockedFor, recordFailure, sweepFailures, throttleKeys, USERNAME_LIMIT, WINDOW_MS } from '../../src/auth/login-throttle.ts';
import { openStore } from '../../src/store/open.ts';
import { tempDir } from '../helpers/server.ts';

const store = openStore(tempDir());
t.teardown(() => store.close());
const T0 = Date.parse('2026-05-04T10:00:00Z');

t.test('the window runs from the first failure; Retry-After is what is left of it', async (t) => {
  const keys = throttleKeys('198.51.100.1', 'Alice');
  for (let i = 0; i < USERNAME_LIMIT - 1; i++) await recordFailure(store, keys, T0 + i * 1000);
  t.equal(lockedFor(store, keys, T0 + 10_000), 0, 'one below the limit');
  await recordFailure(store, keys, T0 + 60_000);
  t.equal(lockedFor(store, keys, T0 + 60_000), (WINDOW_MS - 60_000) / 1000);
  t.equal(lockedFor(store, throttleKeys('203.0.113.9', 'ALICE'), T0 + 60_000), (WINDOW_MS - 60_000) / 1000, 'same username from elsewhere, any case');
  t.equal(lockedFor(store, throttleKeys('198.51.100.1', 'bob'), T0 + 60_000), 0, 'the address is still below its own limit');
  t.equal(lockedFor(store, keys, T0 + WINDOW_MS), 0, 'open when the window ends');
});

t.test('the address limit covers many usernames', async (t) => {
  for (let i = 0; i < ADDRESS_LIMIT; i++) await recordFailure(store, throttleKeys('192.0.2.7', `user${i}`), T0);
  t.ok(lockedFor(store, throttleKeys('192.0.2.7', 'fresh'), T0 + 1000) > 0);
  t.equal(lockedFor(store, throttleKeys('192.0.2.8', 'fresh'), T0 + 1000), 0);
});

t.test('stale counts are swept, live ones kept', async (t) => {
  await recordFailure(store, throttleKeys('192.0.2.99', 'late'), T0 + WINDOW_MS);
  await sweepFailures(store, T0 + WINDOW_MS + 1);
  t.same([...store.db.loginFailures.getKeys({})].sort(), ['addr:192.0.2.99', 'user:late']);
});
