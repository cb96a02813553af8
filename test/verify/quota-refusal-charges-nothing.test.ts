// A call the quota cannot take is refused whole (429 with Retry-After) before inference: no
// units held, no ledger line, the key not bound. In process, on a real LMDB store and a real
// PostgreSQL (test/verify/world.ts).

import t from 'tap';
import { setGrant } from '../../src/admin/tokens.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, audits, bothStores, call, charges, codeOf, usedBy, world } from './world.ts';

const stores = await bothStores(t);

for (const s of stores) {
  t.test(`on ${s.kind}`, async (t) => {
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
  });
}
