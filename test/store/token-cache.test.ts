import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { bearer, makeToken, startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// The verify path's token cache on PostgreSQL (TOKEN_CACHE_SECONDS): a token revoked on
// another node while this node still holds it is refused by the reservation, which re-reads
// the token in its one database call: 401, nothing charged. /v1/me reads
// the store every time.

const pg = await startPostgres();
t.teardown(() => pg.stop());
const env = { DATABASE_URL: pg.url, WORKERS: '1', TOKEN_CACHE_SECONDS: '300' };
const [a, b] = await Promise.all([startServer({ env, ready: true, timeoutMs: 240_000 }), startServer({ env, ready: true, timeoutMs: 240_000 })]);
t.teardown(() => Promise.all([a.stop(), b.stop()]));

t.test('a token revoked on node A is refused on node B at once, though B still caches it', async (t) => {
  const { id, token } = await makeToken(a, ['rgb_liveness:10:day']);
  const first = await postVerify(b.baseUrl, token, 'rgb_liveness', request([single({ id: 'tc-1' })]));
  t.equal(first.status, 200, 'B read the token (and now holds it for 300 s)');

  const revoked = await a.cli(['token', 'revoke', id]);
  t.equal(revoked.code, 0, revoked.stderr);

  const after = await postVerify(b.baseUrl, token, 'rgb_liveness', request([single({ id: 'tc-2' })]), { 'idempotency-key': 'k-revoked' });
  t.equal(after.status, 401, after.text);
  t.equal(after.json.error.code, 'invalid_token');
  // the call got past accept on the cached record: its audit line counted the capture, so it
  // was the reservation's own re-read of the token that refused it
  const rid = after.headers.get('x-request-id')!;
  const line = await waitFor(async () => (await b.cli(['audit', 'list', '--token', id])).json.items.find((x: any) => x.request_id === rid), { what: 'the audit line of the refused call' });
  t.match(line, { status: 401, error_code: 'invalid_token', captures: 1, charged_units: 0 });
  t.equal((await fetch(`${b.baseUrl}/v1/me`, { headers: bearer(token) })).status, 401, '/v1/me is not cached');
  const ledger = await a.cli(['ledger', 'list', '--token', id]);
  t.equal(ledger.json.items.filter((e: any) => e.kind === 'charge').length, 1, 'only the first call was charged');
  t.match((await a.cli(['ledger', 'verify'])).json, { ok: true });
});

t.test('a device session revoked or used up on node A is refused on node B at once, though B still caches it', async (t) => {
  const { id, token } = await makeToken(a, ['rgb_liveness:10:day']);
  const mint = async (max: number) => {
    const r = await fetch(`${a.baseUrl}/v1/sessions`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ module_id: 'rgb_liveness', max_captures: max }) });
    t.equal(r.status, 201);
    return (await r.json()) as { session_id: string; session_token: string };
  };
  const charges = async () => (await a.cli(['ledger', 'list', '--token', id])).json.items.filter((e: any) => e.kind === 'charge').length;

  const revokedLater = await mint(3);
  t.equal((await postVerify(b.baseUrl, revokedLater.session_token, 'rgb_liveness', request([single({ id: 'sc-1' })]))).status, 200, 'B read the session (and now holds it for 300 s)');
  const del = await fetch(`${a.baseUrl}/v1/sessions/${revokedLater.session_id}`, { method: 'DELETE', headers: bearer(token) });
  t.equal(del.status, 204);
  const afterRevoke = await postVerify(b.baseUrl, revokedLater.session_token, 'rgb_liveness', request([single({ id: 'sc-2' })]));
  t.equal(afterRevoke.status, 401, afterRevoke.text);
  t.equal(afterRevoke.json.error.code, 'invalid_session_token');
  // past accept on the cached record: its audit line counted the capture, so the reservation's
  // own re-read of the session refused it
  const rid = afterRevoke.headers.get('x-request-id')!;
  const line = await waitFor(async () => (await b.cli(['audit', 'list', '--token', id])).json.items.find((x: any) => x.request_id === rid), { what: 'the audit line of the refused call' });
  t.match(line, { status: 401, captures: 1, charged_units: 0 });

  const usedUp = await mint(1);
  t.equal((await postVerify(b.baseUrl, usedUp.session_token, 'rgb_liveness', request([single({ id: 'sc-3' })]))).status, 200, 'its one capture, on B');
  const more = await postVerify(b.baseUrl, usedUp.session_token, 'rgb_liveness', request([single({ id: 'sc-4' })]));
  t.equal(more.status, 429, more.text);
  t.equal(more.json.error.code, 'session_captures_exceeded');
  t.equal(await charges(), 2, 'one charge per session, no more');
  t.match((await a.cli(['ledger', 'verify'])).json, { ok: true });
});
