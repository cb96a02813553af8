import t from 'tap';
import { jwksOf, signedVerdict, verdictChecks as check } from '../helpers/verdicts.ts';
import { startNodes, startPostgres } from '../helpers/postgres.ts';
import { makeToken, runCli, tempDir, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { SHARED_JWKS_CACHE_MS } from '../../src/http/routes/jwks.ts';
import { SHARED_KEY_CACHE_MS } from '../../src/signing/source.ts';

// Emergency revocation with keys shared through PostgreSQL (security issue 29): two node
// processes of the real service on one database; the CLI, on neither node's DATA_DIR, revokes
// the key both sign with. Every node stops publishing it within SHARED_JWKS_CACHE_MS and signs
// with the new key within SHARED_KEY_CACHE_MS.
const pg = await startPostgres();
t.teardown(() => pg.stop());
const nodes = await startNodes(t, 2, { DATABASE_URL: pg.url, WORKERS: '1' });
const [a] = nodes as [ServerHandle, ServerHandle];
const cli = (args: string[]) => runCli(tempDir(), args, '', { DATABASE_URL: pg.url });

const kidsOf = async (n: ServerHandle) => (await jwksOf(n)).keys.map((k) => k.kid!);



t.test('`keys revoke` on the shared database: every node unpublishes the key and signs with a new one', async (t) => {
  const { token } = await makeToken(a, ['rgb_liveness:100:day']);
  const leaked = await signedVerdict(a, token);
  for (const n of nodes) t.same(await kidsOf(n), [leaked.kid], 'both nodes publish the one shared key');

  const r = await cli(['keys', 'revoke', leaked.kid, '--by', 'bob']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { kid: leaked.kid, revoked_by: 'bob', already_revoked: false });
  t.not(r.json.current, leaked.kid);

  // Checked on each poll by the request's start time, as in test/store/multi-node-keys: a
  // request that starts after the bound and still sees the old state is a failure, whatever
  // the machine's load.
  const committed = Date.now();
  const late: string[] = [];
  const poll = (n: ServerHandle, what: string, bound: number, done: () => Promise<boolean>) =>
    waitFor(async () => {
      const start = Date.now();
      const ok = await done();
      if (!ok && start > committed + bound) late.push(`${what} ${n.baseUrl} at +${start - committed} ms`);
      return ok;
    }, { timeoutMs: SHARED_KEY_CACHE_MS * 4, intervalMs: 100, what: `${n.baseUrl} ${what}` });
  for (const n of nodes) {
    await poll(n, 'unpublishing the revoked key', SHARED_JWKS_CACHE_MS, async () => !(await kidsOf(n)).includes(leaked.kid));
    t.notOk(await check(await jwksOf(n), leaked.body, leaked.signature), `${n.baseUrl}: a verdict signed with the revoked key no longer verifies`);
  }
  for (const n of nodes) {
    await poll(n, 'signing with the new key', SHARED_KEY_CACHE_MS, async () => (await signedVerdict(n, token)).kid === r.json.current);
    const fresh = await signedVerdict(n, token);
    t.ok(await check(await jwksOf(n), fresh.body, fresh.signature), `${n.baseUrl}: new verdicts verify`);
  }
  t.same(late, [], 'no request started after its bound saw the revoked key');

  const list = await cli(['keys', 'list']);
  t.equal(list.code, 0, list.stderr);
  t.match(list.json.keys, [
    { kid: leaked.kid, revoked_at: r.json.revoked_at, revoked_by: 'bob', current: false, published: false },
    { kid: r.json.current, current: true, published: true },
  ]);
  const again = await cli(['keys', 'revoke', leaked.kid]);
  t.equal(again.code, 0, again.stderr);
  t.match(again.json, { already_revoked: true, revoked_by: 'bob', current: r.json.current });
  const unknown = await cli(['keys', 'revoke', 'B'.repeat(43)]);
  t.equal(unknown.code, 3, 'not found');
  t.match(unknown.stderr, /no signing key/);

  // later rotations keep the revoked key unpublished and its record
  const rotated = await cli(['keys', 'rotate']);
  t.equal(rotated.code, 0, rotated.stderr);
  t.equal(rotated.json.retired, r.json.current);
  const after = await cli(['keys', 'list']);
  t.match(after.json.keys[0], { kid: leaked.kid, revoked_by: 'bob', published: false });
});
