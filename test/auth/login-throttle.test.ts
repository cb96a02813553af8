import t from 'tap';
import {
  ADDRESS_LIMIT,
  loginWait,
  NAME_DELAY_CAP_S,
  NAME_FREE_FAILURES,
  nameDelaySeconds,
  PAIR_LIMIT,
  recordLoginFailure,
  recordLoginSuccess,
  sweepFailures,
  WINDOW_MS,
  type FailureCount,
} from '../../src/store/lmdb/login-throttle.ts';
import { openStore } from '../../src/store/lmdb/open.ts';
import { REMOVE_BATCH, SCAN_CHUNK } from '../../src/store/lmdb/prune-scan.ts';
import { tempDir } from '../helpers/server.ts';
import { countingTurns, recordReads, recordRemovals } from '../helpers/store-reads.ts';

const store = openStore(tempDir());
t.teardown(() => store.close());
const T0 = Date.parse('2026-05-04T10:00:00Z');

t.test('one address guessing one name: a window from the first failure, Retry-After is what is left of it', async (t) => {
  for (let i = 0; i < PAIR_LIMIT - 1; i++) await recordLoginFailure(store, '198.51.100.1', 'Alice', T0 + i * 1000);
  t.equal(loginWait(store, '198.51.100.1', 'Alice', T0 + 10_000), 0, 'one below the limit');
  await recordLoginFailure(store, '198.51.100.1', 'Alice', T0 + 60_000);
  t.equal(loginWait(store, '198.51.100.1', 'Alice', T0 + 60_000), (WINDOW_MS - 60_000) / 1000);
  t.equal(loginWait(store, '198.51.100.1', 'ALICE', T0 + 60_000), (WINDOW_MS - 60_000) / 1000, 'any case');
  t.equal(loginWait(store, '198.51.100.1', 'bob', T0 + 60_000), 0, 'the address is still below its own limit');
  t.equal(loginWait(store, '198.51.100.1', 'Alice', T0 + WINDOW_MS), 0, 'open when the window ends');
});

t.test('guessing a name from elsewhere never locks its operator out of a known address', async (t) => {
  const name = 'operator';
  await recordLoginSuccess(store, '10.0.0.5', name, T0);
  // a distributed guesser: one failure from each of many addresses
  for (let i = 0; i < 12; i++) await recordLoginFailure(store, `203.0.113.${i}`, name, T0 + 1000 + i);
  const last = T0 + 1000 + 11;
  t.equal(loginWait(store, '10.0.0.5', name, last), 0, 'the known address logs in at once');
  const delay = nameDelaySeconds(12);
  t.equal(delay, 2 ** (12 - NAME_FREE_FAILURES));
  t.equal(loginWait(store, '203.0.113.200', name, last), delay, 'a new address waits the growing delay');
  t.equal(loginWait(store, '203.0.113.200', name, last + delay * 1000), 0, 'and only that long');
  t.equal(loginWait(store, '203.0.113.200', 'someone-else', last), 0, 'other names are not slowed');
});

t.test('the per-name delay grows with each failure, is capped, and ends 15 minutes after the last one', async (t) => {
  t.same([0, 1, 2, 3, 4, 5, 6, 7].map(nameDelaySeconds), [0, 0, 0, 0, 0, 1, 2, 4]);
  t.equal(nameDelaySeconds(100), NAME_DELAY_CAP_S);
  const name = 'slow-target';
  let at = T0;
  for (let i = 0; i < 30; i++) {
    await recordLoginFailure(store, `198.18.0.${i}`, name, at);
    at += NAME_DELAY_CAP_S * 1000;
  }
  const lastFailure = at - NAME_DELAY_CAP_S * 1000;
  t.equal(loginWait(store, '198.18.1.1', name, lastFailure + 1000), NAME_DELAY_CAP_S - 1, 'a steady guesser stays at the cap');
  t.equal(loginWait(store, '198.18.1.1', name, lastFailure + WINDOW_MS), 0, 'forgotten after 15 quiet minutes');
});

t.test('a success clears the name, not the address', async (t) => {
  for (let i = 0; i < ADDRESS_LIMIT - 1; i++) await recordLoginFailure(store, '192.0.2.50', `n${i}`, T0);
  for (let i = 0; i < NAME_FREE_FAILURES + 3; i++) await recordLoginFailure(store, `192.0.3.${i}`, 'carol', T0);
  t.ok(loginWait(store, '192.0.2.50', 'carol', T0) > 0, 'carol is slowed from a new address');
  await recordLoginSuccess(store, '192.0.4.1', 'carol', T0);
  t.equal(loginWait(store, '192.0.2.50', 'carol', T0), 0, 'the name is cleared by the success');
  await recordLoginFailure(store, '192.0.2.50', 'x', T0);
  t.ok(loginWait(store, '192.0.2.50', 'carol', T0) > 0, 'the address count was kept and reaches its limit');
});

t.test('the address limit covers many usernames', async (t) => {
  for (let i = 0; i < ADDRESS_LIMIT; i++) await recordLoginFailure(store, '192.0.2.7', `user${i}`, T0);
  t.ok(loginWait(store, '192.0.2.7', 'fresh', T0 + 1000) > 0);
  t.equal(loginWait(store, '192.0.2.8', 'fresh', T0 + 1000), 0);
});

t.test('stale counts are swept, live ones kept', async (t) => {
  const s = openStore(tempDir());
  t.teardown(() => s.close());
  await recordLoginFailure(s, '192.0.2.1', 'early', T0);
  await recordLoginSuccess(s, '192.0.2.1', 'early', T0);
  await recordLoginFailure(s, '192.0.2.99', 'late', T0 + WINDOW_MS);
  await sweepFailures(s, T0 + WINDOW_MS + 1);
  t.same([...s.db.loginFailures.getKeys({})].sort(), ['addr:192.0.2.99', 'known:early|192.0.2.1', 'pair:192.0.2.99|late', 'user:late']);
});

t.test('a sweep of a spray: read in chunks with the event loop turning between them, removed in writes of at most REMOVE_BATCH', async (t) => {
  // it runs once a minute on the main thread (src/startup.ts), which also relays inference
  const s = openStore(tempDir());
  t.teardown(() => s.close());
  const stale = 2 * REMOVE_BATCH + 37;
  const live = SCAN_CHUNK + 5;
  const staleCount: FailureCount = { count: 1, window_start: T0, last_failure: T0 };
  const liveCount: FailureCount = { count: 1, window_start: T0 + WINDOW_MS, last_failure: T0 + WINDOW_MS };
  const db = s.db.loginFailures;
  await db.transaction(() => {
    for (let i = 0; i < stale; i++) void db.put(`addr:2001:db8:0:${i.toString(16)}::/64`, staleCount);
    for (let i = 0; i < live; i++) void db.put(`addr:2001:db8:1:${i.toString(16)}::/64`, liveCount);
  });
  let reads: number[] = [];
  const removals = await countingTurns(async (turn) => {
    reads = recordReads(t, db, turn);
    const removals = recordRemovals(t, db, turn);
    await sweepFailures(s, T0 + WINDOW_MS + 1);
    return removals;
  });
  t.equal(reads.length, Math.ceil((stale + live) / SCAN_CHUNK), `read in chunks of ${SCAN_CHUNK}`);
  t.ok(reads.every((at, i) => i === 0 || at > reads[i - 1]!), `the event loop turned between chunks (at turns ${reads.join(', ')})`);
  const sizes = [...removals.values()];
  t.ok(sizes.length >= Math.ceil(stale / REMOVE_BATCH) && sizes.every((n) => n <= REMOVE_BATCH), `removed in writes of ${sizes.join(', ')}`);
  t.equal(db.getCount(), live, 'every stale count went, every live one stayed');
});
