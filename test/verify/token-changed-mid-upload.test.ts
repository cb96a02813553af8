// The token is checked when the call starts and again inside the reservation, at the call's
// time once its body is in: an upload can take a while, and a token revoked, disabled,
// expired or stripped of its grant meanwhile must not get one more capture served and
// charged. In process, with the upload held while the operator (or the clock) acts.

import t from 'tap';
import { request, single } from '../helpers/captures.ts';
import type { TokenRecord } from '../../src/store/records.ts';
import { addToken, call, codeOf, heldUpload, world } from './fakes.ts';

const cases: [string, (token: TokenRecord, w: ReturnType<typeof world>) => void, number, string][] = [
  ['revoked', (token, w) => w.store.tokens.set(token.id, { ...token, revoked: true }), 401, 'invalid_token'],
  ['disabled', (token, w) => w.store.tokens.set(token.id, { ...token, enabled: false }), 401, 'invalid_token'],
  ['deleted', (token, w) => w.store.tokens.delete(token.id), 401, 'invalid_token'],
  ['past its expiry', (_token, w) => (w.clock.at += 61_000), 401, 'invalid_token'],
  ['no longer granted the module', (token, w) => w.store.tokens.set(token.id, { ...token, grants: [] }), 403, 'module_forbidden'],
];

for (const [what, change, status, code] of cases) {
  t.test(`a token ${what} while its body uploads: ${status} ${code}, nothing charged, nothing inferred`, async (t) => {
    const w = world();
    const { token, plaintext } = addToken(w);
    w.store.tokens.set(token.id, { ...token, expires_at: new Date(w.clock.at + 60_000).toISOString() });
    const upload = heldUpload();
    const answer = call(w, plaintext, request([single({ id: `mid-${what}` })]), { upload, idempotencyKey: 'k-mid' });
    await upload.reached;
    change(token, w);
    upload.open();
    const got = await answer;
    t.equal(got.status, status);
    t.equal(codeOf(got, 'reserve'), code);
    t.same(w.store.ledger, [], 'no ledger entry');
    t.equal(w.store.keys.size, 0, 'the key is not bound');
    t.equal(w.inference.calls, 0);
    t.ok(w.calls.includes('slot released'), 'the slot went back');
  });
}

t.test('the same token unchanged through the upload is served', async (t) => {
  const w = world();
  const { plaintext } = addToken(w);
  const upload = heldUpload();
  const answer = call(w, plaintext, request([single({ id: 'mid-unchanged' })]), { upload });
  await upload.reached;
  w.clock.at += 30_000;
  upload.open();
  t.equal((await answer).status, 200);
  t.equal(w.store.charges(), 1);
});
