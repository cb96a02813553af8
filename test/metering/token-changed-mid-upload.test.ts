import t from 'tap';
import { request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { makeToken, startServer } from '../helpers/server.ts';
import { RawConn, rawAnswer, snapshot, verifyHead } from '../ingest/helpers.ts';

// The token is checked when the request starts and again inside the reservation: an upload
// can take a while, and an operator who revokes or disables a token meanwhile must not see
// one more capture served and charged on it.
const server = await startServer({ ready: true });
t.teardown(() => server.stop());

for (const [label, change] of [
  ['revoked', (id: string) => ['token', 'revoke', id]],
  ['disabled', (id: string) => ['token', 'disable', id]],
] as const) {
  t.test(`a token ${label} while its request uploads: 401 invalid_token, nothing charged`, async (t) => {
    const tok = await makeToken(server, ['rgb_liveness:10:day']);
    const b = request([single({ id: `mid-${label}` })]);
    const before = await snapshot(server, tok.token);
    const conn = new RawConn(server.port);
    await conn.connected;
    await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
    const half = Math.floor(b.body.length / 2);
    await conn.write(b.body.subarray(0, half));
    const cli = await server.cli(change(tok.id));
    t.equal(cli.code, 0, cli.stderr);
    await conn.write(b.body.subarray(half));
    const answer = rawAnswer(await conn.response());
    conn.close();
    t.equal(answer.status, 401, JSON.stringify(answer.json));
    t.equal(answer.json?.error?.code, 'invalid_token');
    const db = lmdbOpen(server.dataDir);
    const ledger = [...db.ledger.getRange({})].map((e) => e.value as any).filter((e) => e.token_id === tok.id);
    await db.close();
    t.same(ledger, [], 'no ledger entry for the token');
    // the snapshot's /v1/me would now answer 401, so the stores are compared directly
    const after = lmdbOpen(server.dataDir);
    for (const name of ['ledger', 'counters', 'reservations', 'idempotency', 'results'] as const) {
      t.equal(JSON.stringify([...after[name].getRange({})].map((e) => [e.key, e.value])), before.dbs[name], `${name} unchanged`);
    }
    await after.close();
  });
}
