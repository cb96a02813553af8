// The token is checked when the call starts and again inside the reservation, at the call's
// time once its body is in: an upload can take a while, and a token revoked, disabled,
// expired or stripped of its grant meanwhile must not get one more capture served and
// charged. In process, with the upload held while the operator (or the clock) acts, on a real
// LMDB store and a real PostgreSQL (the re-check is TypeScript in one, SQL in the other);
// the operator's changes are the console's and CLI's own (src/admin/tokens.ts).
// Replaces the spawned test/metering/token-changed-mid-upload.test.ts and
// token-changed-mid-upload-pg.test.ts (with test/metering/mid-upload.ts): the same changes
// (revoked, disabled) on the same stores, the same answer, the same check that no ledger
// entry, counter, reservation, key or result was written.

import t from 'tap';
import { patchToken, removeGrant, revokeToken } from '../../src/admin/tokens.ts';
import type { TokenRecord } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, bothStores, call, charges, codeOf, heldUpload, world, type World } from './world.ts';

const cases: [string, (token: TokenRecord, w: World) => unknown, number, string][] = [
  ['revoked', (token, w) => revokeToken(w.store, token.id), 401, 'invalid_token'],
  ['disabled', (token, w) => patchToken(w.store, token.id, { enabled: false }), 401, 'invalid_token'],
  ['past its expiry', (_token, w) => (w.clock.at += 61_000), 401, 'invalid_token'],
  ['no longer granted the module', (token, w) => removeGrant(w.store, token.id, 'rgb_liveness'), 403, 'module_forbidden'],
];

for (const s of await bothStores(t)) {
  t.test(`on ${s.kind}`, async (t) => {
    for (const [what, change, status, code] of cases) {
      t.test(`a token ${what} while its body uploads: ${status} ${code}, nothing charged, nothing inferred`, async (t) => {
        const w = world(s.store);
        const { token, plaintext } = await addToken(w, undefined, w.clock.at + 60_000);
        const before = await s.rows();
        const upload = heldUpload();
        const answer = call(w, plaintext, request([single({ id: `mid-${what}` })]), { upload, idempotencyKey: 'k-mid' });
        await upload.reached;
        t.ok(w.calls.includes('body'), 'the token was live when the call started: accept let its body in');
        await change(token, w);
        upload.open();
        const got = await answer;
        t.equal(got.status, status);
        t.equal(codeOf(got, 'reserve'), code);
        t.equal(await s.rows(), before, 'no ledger entry, counter, reservation, key or result written');
        t.equal(w.inference.calls, 0);
        t.ok(w.calls.includes('slot released'), 'the slot went back');
      });
    }

    t.test('the same token unchanged through the upload is served', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const upload = heldUpload();
      const answer = call(w, plaintext, request([single({ id: 'mid-unchanged' })]), { upload });
      await upload.reached;
      w.clock.at += 30_000;
      upload.open();
      t.equal((await answer).status, 200);
      t.equal(await charges(w, token), 1);
    });
  });
}
