// A console session's idle clock is written at most every 15 s, after the session was read: a
// logout, password change or disabled account that deletes it in between must stay done. The
// touch used to write the whole record read before, which recreated the deleted session (a
// race an attacker holding a stolen cookie could win by polling while the owner changed the
// password). Run on both stores, the deletion made exactly between the read and the touch.
import t, { type Test } from 'tap';
import { findSession, createSession } from '../../src/auth/session.ts';
import type { StoreBackend } from '../../src/store/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import { bothStores } from '../verify/world.ts';

const config = loadConfig({});
const T0 = Date.parse('2026-06-10T08:00:00.000Z');
const user = { id: 'usr_touch', username: 'root', role: 'admin' as const };

/** `store`, whose getSession runs `between` after its read and before it returns. */
function racing(store: StoreBackend, between: () => Promise<unknown>): StoreBackend {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'getSession') {
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      }
      return async (key: string) => {
        const s = await target.getSession(key);
        await between();
        return s;
      };
    },
  });
}

async function rules(t: Test, store: StoreBackend) {
  t.test('a session deleted between its read and its touch stays deleted, and the request is refused', async (t) => {
    const { id } = await createSession(store, config, user, T0);
    const { id: other } = await createSession(store, config, user, T0);
    // the password change (src/http/routes/admin.ts) ends the user's other sessions
    const found = await findSession(racing(store, () => store.deleteUserSessions(user.id)), config, id, T0 + 16_000);
    t.equal(found, undefined, 'the request that raced the delete is refused');
    t.equal(await findSession(store, config, id, T0 + 16_001), undefined, 'and the session is not recreated');
    t.equal(await findSession(store, config, other, T0 + 16_001), undefined);
  });

  t.test('a live session is touched: its idle clock moves, at most every 15 s', async (t) => {
    const { id } = await createSession(store, config, { ...user, id: 'usr_b' }, T0);
    t.match(await findSession(store, config, id, T0 + 5_000), { session: { last_seen: T0 } }, 'not written within 15 s');
    t.match(await findSession(store, config, id, T0 + 16_000), { session: { last_seen: T0 + 16_000 } });
    t.match(await findSession(store, config, id, T0 + 17_000), { session: { last_seen: T0 + 16_000 } }, 'as stored');
    // idle: 30 minutes after the last touch, not after the login (each find below touches it;
    // the second comes 58 minutes after the login, which only a clock run from the touch allows)
    const touched = T0 + 16_000 + 29 * 60_000;
    t.ok(await findSession(store, config, id, touched), 'alive within the idle time of the touch');
    t.ok(await findSession(store, config, id, touched + 29 * 60_000), 'alive 58 minutes after the login: the idle time counts from the last touch');
    t.equal(await findSession(store, config, id, touched + 29 * 60_000 + 31 * 60_000), undefined, 'gone 31 minutes after the last touch');
  });
}

for (const s of await bothStores(t)) t.test(`on ${s.kind}`, async (t) => rules(t, s.store));
