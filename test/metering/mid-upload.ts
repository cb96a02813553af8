import type { Test } from 'tap';
import { patchToken, revokeToken } from '../../src/admin/tokens.ts';
import { request, single } from '../helpers/captures.ts';
import { makeToken, type ServerHandle } from '../helpers/server.ts';
import { withServerStore } from '../helpers/store.ts';
import { RawConn, rawAnswer, verifyHead } from '../helpers/ingest.ts';

// The token is checked when the request starts and again inside the reservation: an upload
// can take a while, and an operator who revokes or disables a token meanwhile must not see
// one more capture served and charged on it. Run on LMDB and on PostgreSQL (the re-check is
// TypeScript in one, PL/pgSQL in the other), by token-changed-mid-upload{,-pg}.test.ts.

export const CHANGES = [
  ['revoked', (store: Parameters<typeof revokeToken>[0], id: string) => revokeToken(store, id)],
  ['disabled', (store: Parameters<typeof revokeToken>[0], id: string) => patchToken(store, id, { enabled: false })],
] as const;

/** `rows()` dumps every metering record of the store (ledger, counters, reservations,
 * idempotency, results) as one comparable string. */
export async function changedMidUpload(t: Test, server: ServerHandle, label: string, change: (typeof CHANGES)[number][1], rows: () => Promise<string>): Promise<void> {
  const tok = await makeToken(server, ['rgb_liveness:10:day']);
  const b = request([single({ id: `mid-${label}` })]);
  // the token answers on /v1/me before the upload: it is live when the request starts
  t.equal((await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${tok.token}` } })).status, 200);
  const before = await rows();
  const conn = new RawConn(server.port);
  await conn.connected;
  await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
  const half = Math.floor(b.body.length / 2);
  await conn.write(b.body.subarray(0, half));
  // the operator's change, written to the server's store from another process (as the CLI does)
  t.ok(await withServerStore(server, (store) => change(store, tok.id)), `token ${label}`);
  await conn.write(b.body.subarray(half));
  const answer = rawAnswer(await conn.response());
  conn.close();
  t.equal(answer.status, 401, JSON.stringify(answer.json));
  t.equal(answer.json?.error?.code, 'invalid_token');
  t.equal(await rows(), before, 'no ledger entry, counter, reservation, key or result written');
}
