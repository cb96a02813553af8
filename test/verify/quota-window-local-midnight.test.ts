// Quota windows are UTC days and months (spec rule 4) also across the host's LOCAL midnight,
// in process on a real LMDB store and a real PostgreSQL (test/verify/world.ts). This process
// runs at UTC+14 (Kiritimati), where local midnight is 10:00 UTC: two calls of one UTC day, at
// 09:59 and 10:01 UTC, fall on two local dates. test/verify/quota.test.ts and
// test/metering/quota-window-utc.test.ts cross UTC midnight only, where a window key that takes
// its day from local time (`getDate()` beside `getUTCMonth()`) still changes at the right moment:
// issue 43's mutation check (bench/results/mutation-check.md) planted that slip in
// src/store/periods.ts, the one window rule of both stores, and both files passed. Here it
// splits one UTC day into two windows, and the second call would get a fresh quota.
process.env.TZ = 'Pacific/Kiritimati';

import t from 'tap';
import type { TokenRecord } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, bothStores, call, charges, codeOf, world, type World } from './world.ts';

const at = (iso: string) => Date.parse(iso);

async function usage(w: World, token: TokenRecord) {
  return (await w.store.usageSnapshot((await w.store.getToken(token.id))!, w.clock.at)).find((u) => u.module_id === 'rgb_liveness');
}

const stores = await bothStores(t);

t.test('the process runs at UTC+14: 09:59 and 10:01 UTC fall on two local dates', async (t) => {
  t.equal(new Date(at('2026-03-10T09:59:00Z')).getDate(), 10);
  t.equal(new Date(at('2026-03-10T10:01:00Z')).getDate(), 11);
});

for (const s of stores) {
  t.test(`on ${s.kind}`, async (t) => {
    t.test('day window: one UTC day across local midnight is one window', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T09:59:00.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 2, period: 'day' }]);
      t.equal((await call(w, plaintext, request([single(), single()]))).status, 200, 'two units, local 23:59');
      w.clock.at = at('2026-03-10T10:01:00.000Z');
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: 2, period: 'day', used: 2, remaining: 0, reset_at: '2026-03-11T00:00:00.000Z' }, 'local 00:01 the next day: the same UTC day, the same usage');
      const refused = await call(w, plaintext, request([single()]));
      t.equal(refused.status, 429);
      t.equal(codeOf(refused, 'reserve'), 'quota_exceeded');
      t.equal(refused.headers?.['Retry-After'], String(13 * 3600 + 59 * 60), 'seconds to 00:00 UTC, not to local midnight');
      t.equal(await charges(w, token), 1, 'the refused call charged nothing');
      w.clock.at = at('2026-03-11T00:00:00.000Z');
      t.equal((await call(w, plaintext, request([single()]))).status, 200, 'the next UTC day, a new window');
    });

    t.test('month window: one UTC month across the local first of the month is one window', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-31T09:59:00.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1, period: 'month' }]);
      t.equal((await call(w, plaintext, request([single()]))).status, 200, 'local 31 March, 23:59');
      w.clock.at = at('2026-03-31T10:01:00.000Z');
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: 1, period: 'month', used: 1, remaining: 0, reset_at: '2026-04-01T00:00:00.000Z' }, 'local 1 April: still March in UTC');
      const refused = await call(w, plaintext, request([single()]));
      t.equal(refused.status, 429);
      t.equal(refused.headers?.['Retry-After'], String(13 * 3600 + 59 * 60), 'seconds to 1 April 00:00 UTC');
      w.clock.at = at('2026-04-01T00:00:00.000Z');
      t.equal((await call(w, plaintext, request([single()]))).status, 200, 'the next UTC month, a new window');
    });
  });
}
