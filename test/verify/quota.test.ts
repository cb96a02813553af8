// The quota rules as a caller meets them, in process on a real LMDB store and a real
// PostgreSQL (test/verify/world.ts): a call the quota cannot take refused whole (429 with
// Retry-After) before inference, with no units held, no ledger line and the key not bound;
// UTC day and month windows (their usage, reset_at and
// Retry-After across midnight UTC), `never` quotas, a batch reserved whole, unlimited and
// zero limits, grants changed or removed keeping the window's usage, every result charged
// (retries included) with the usage as of settlement in the answer, calls without a key each
// charged, and a ledger that agrees with the counters.
// This process runs at UTC+14 (Kiritimati): a window computed in local time is a day off near
// midnight UTC, which a UTC host cannot show.
// Replaces the spawned test/metering/quota.test.ts (one server, with a clock file and TZ):
// each of its assertions is here, on both stores; usage is read with the store's
// usageSnapshot, what GET /v1/me answers (src/http/routes/business.ts), and the engine's
// retry for an incomplete colour capture is the fake engine's (the real engine's decision is
// test/inference/result-records.test.ts's).
process.env.TZ = 'Pacific/Kiritimati';

import t from 'tap';
import { removeGrant, setGrant } from '../../src/admin/tokens.ts';
import { color, request, sequence, single } from '../helpers/captures.ts';
import { addToken, audits, bothStores, call, charges, codeOf, usedBy, world, type World } from './world.ts';
import type { TokenRecord } from '../../src/store/index.ts';

const at = (iso: string) => Date.parse(iso);

async function usage(w: World, token: TokenRecord, module = 'rgb_liveness') {
  const fresh = (await w.store.getToken(token.id))!;
  return (await w.store.usageSnapshot(fresh, w.clock.at)).find((u) => u.module_id === module);
}

const json = (answer: { body?: unknown }) => JSON.parse(answer.body as string);

for (const s of await bothStores(t)) {
  t.test(`on ${s.kind}`, async (t) => {
    t.test('day window: usage, reset_at and Retry-After across midnight UTC', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-01-31T23:59:50.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 2, period: 'day' }]);
      t.equal((await call(w, plaintext, request([single(), single()]))).status, 200, 'batch of 2 within limit');
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: 2, period: 'day', used: 2, remaining: 0, reset_at: '2026-02-01T00:00:00.000Z' });
      w.clock.at = at('2026-01-31T23:59:50.000Z');
      const denied = await call(w, plaintext, request([single()]));
      t.equal(denied.status, 429);
      t.equal(codeOf(denied, 'reserve'), 'quota_exceeded');
      t.equal(denied.headers?.['Retry-After'], '10', 'seconds to 00:00 UTC');
      w.clock.at = at('2026-02-01T00:00:00.000Z');
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: 2, period: 'day', used: 0, remaining: 2, reset_at: '2026-02-02T00:00:00.000Z' });
      t.equal((await call(w, plaintext, request([single()]))).status, 200, 'new day, new units');
    });

    t.test('month window resets at 00:00 UTC on the first; never has no reset', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1, period: 'month' }, { module_id: 'color_liveness', limit: 1, period: 'never' }]);
      w.clock.at = at('2026-02-28T23:59:58.000Z');
      t.equal((await call(w, plaintext, request([single()]))).status, 200);
      t.equal((await call(w, plaintext, request([color()]), { module: 'color_liveness' })).status, 200);
      w.clock.at = at('2026-02-28T23:59:58.999Z');
      const m = await call(w, plaintext, request([single()]));
      t.equal(m.status, 429);
      t.equal(m.headers?.['Retry-After'], '1');
      const n = await call(w, plaintext, request([color()]), { module: 'color_liveness' });
      t.equal(n.status, 429);
      t.equal(n.headers?.['Retry-After'], undefined, 'never quotas do not recover: no Retry-After');
      t.equal((await usage(w, token, 'color_liveness'))!.reset_at, null);
      w.clock.at = at('2026-03-01T00:00:00.000Z');
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: 1, period: 'month', used: 0, remaining: 1, reset_at: '2026-04-01T00:00:00.000Z' });
      t.equal((await call(w, plaintext, request([single()]))).status, 200);
      t.equal((await call(w, plaintext, request([color()]), { module: 'color_liveness' })).status, 429, 'never stays used up');
    });

    t.test('a batch is reserved whole or rejected whole', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T11:59:59.999Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 3, period: 'day' }]);
      const four = await call(w, plaintext, request([single(), single(), single(), sequence(3)]));
      t.equal(four.status, 429);
      t.equal(four.headers?.['Retry-After'], String(12 * 3600), 'day quota: Retry-After to midnight, as the spec says');
      t.match(json(four).error.message, /more than the whole quota of 3, so split the batch/, 'the message says waiting will not help');
      t.equal((await usage(w, token))!.used, 0, 'nothing reserved');
      const three = await call(w, plaintext, request([single(), sequence(3), single()]));
      t.equal(three.status, 200);
      t.equal(json(three).charged_units, 3);
      t.equal(json(three).results.length, 3);
      t.equal((await usage(w, token))!.used, 3);
    });

    t.test('limit null is unlimited but recorded; limit 0 authorises nothing', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T12:00:00.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: null, period: 'day' }, { module_id: 'color_liveness', limit: 0, period: 'day' }]);
      for (let i = 0; i < 3; i++) t.equal((await call(w, plaintext, request([single()]))).status, 200);
      t.same(await usage(w, token), { module_id: 'rgb_liveness', limit: null, period: 'day', used: 3, remaining: null, reset_at: '2026-03-11T00:00:00.000Z' });
      const zero = await call(w, plaintext, request([color()]), { module: 'color_liveness' });
      t.equal(zero.status, 429);
      t.equal(codeOf(zero, 'reserve'), 'quota_exceeded');
    });

    t.test('changing a limit or re-granting keeps the period usage', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T12:00:00.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 5, period: 'day' }]);
      t.equal((await call(w, plaintext, request([single(), single()]))).status, 200);
      t.ok(await setGrant(s.store, token.id, { module_id: 'rgb_liveness', limit: 3, period: 'day' }));
      t.match(await usage(w, token), { used: 2, remaining: 1 });
      t.ok(await removeGrant(s.store, token.id, 'rgb_liveness'));
      t.equal((await call(w, plaintext, request([single()]))).status, 403, 'ungranted');
      t.ok(await setGrant(s.store, token.id, { module_id: 'rgb_liveness', limit: 3, period: 'day' }));
      t.match(await usage(w, token), { used: 2, remaining: 1 }, 're-grant keeps the usage');
      t.ok(await setGrant(s.store, token.id, { module_id: 'rgb_liveness', limit: 10, period: 'month' }));
      t.match(await usage(w, token), { used: 2, period: 'month' }, 'a changed period sees the usage of its window');
    });

    t.test('live, non-live and retry results all charge; the response carries the usage snapshot', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T12:00:00.000Z');
      const { plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 10, period: 'day' }, { module_id: 'color_liveness', limit: 10, period: 'day' }]);
      w.inference.retryNext = true;
      const r = await call(w, plaintext, request([color({ phases: 2 })]), { module: 'color_liveness' });
      t.equal(r.status, 200);
      t.match(json(r).results[0], { status: 'retry', reason: 'incomplete_capture' });
      t.equal(json(r).charged_units, 1);
      t.same(json(r).usage.map((u: { module_id: string; used: number }) => [u.module_id, u.used]), [['color_liveness', 1], ['rgb_liveness', 0]]);
      const s2 = await call(w, plaintext, request([single()]));
      t.same(json(s2).usage.map((u: { module_id: string; used: number }) => [u.module_id, u.used]), [['color_liveness', 1], ['rgb_liveness', 1]], 'usage as of settlement');
    });

    t.test('calls without a key are independent and each is charged', async (t) => {
      const w = world(s.store);
      w.clock.at = at('2026-03-10T12:00:00.000Z');
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
      const body = request([single({ id: 'same-capture' })]);
      const a = await call(w, plaintext, body);
      const b = await call(w, plaintext, body);
      t.equal(a.status, 200);
      t.equal(b.status, 200);
      t.not(json(a).request_id, json(b).request_id);
      t.equal((await usage(w, token))!.used, 2);
    });

    t.test('a quota used up: 429 quota_exceeded with Retry-After, nothing charged, nothing inferred, the key free', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
      t.equal((await call(w, plaintext, request([single({ id: 'q-1' })]))).status, 200);
      const refused = await call(w, plaintext, request([single({ id: 'q-2' })]), { idempotencyKey: 'k-quota' });
      t.equal(refused.status, 429);
      t.equal(codeOf(refused, 'reserve'), 'quota_exceeded');
      t.ok(refused.headers?.['Retry-After'], 'says when the window resets');
      t.equal(await charges(w, token), 1, 'only the first call was charged');
      t.equal(await usedBy(w, token), 1);
      t.equal(w.inference.calls, 1);
      t.match(w.facts[1], { status: 429, errorCode: 'quota_exceeded', reserved: 0, refunded: 0, charged: 0 });
      t.match((await audits(w, token, 2))[1], { status: 429, error_code: 'quota_exceeded', charged_units: 0, captures: 1 });

      // the operator raises the quota: the key was never bound, so another body on it is a first call
      await setGrant(s.store, token.id, { module_id: 'rgb_liveness', limit: 5, period: 'day' });
      const after = await call(w, plaintext, request([single({ id: 'q-3' })]), { idempotencyKey: 'k-quota' });
      t.equal(codeOf(after, 'settle'), 'verdict');
    });

    t.test('a batch is reserved whole: more captures than units left is refused, not served in part', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 3 }]);
      t.equal((await call(w, plaintext, request([single({ id: 'b-0' })]))).status, 200);
      const batch = await call(w, plaintext, request([single({ id: 'b-1' }), single({ id: 'b-2' }), single({ id: 'b-3' })]));
      t.equal(batch.status, 429, 'three captures, two units left');
      t.equal(await usedBy(w, token), 1);
      t.equal(w.inference.calls, 1);
      const two = await call(w, plaintext, request([single({ id: 'b-4' }), single({ id: 'b-5' })]));
      t.equal(two.status, 200);
      t.equal(JSON.parse(two.body as string).charged_units, 2);
      t.equal(await usedBy(w, token), 3);
    });

    t.test('ledger verify agrees with the counters', async (t) => {
      const check = await s.store.verifyLedger();
      t.equal(check.ok, true);
      t.ok(check.entries > 10);
    });
  });
}
