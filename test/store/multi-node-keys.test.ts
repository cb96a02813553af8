import t from 'tap';
import { jwksOf, signedVerdict, verdictChecks as check } from '../helpers/verdicts.ts';
import { startNodes, startPostgres } from '../helpers/postgres.ts';
import { makeToken, tempDir, type ServerHandle } from '../helpers/server.ts';
import { runCli } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { SHARED_KEY_CACHE_MS } from '../../src/signing/source.ts';

// Two node processes of the real service on one PostgreSQL database, each with its own
// DATA_DIR: the verdict-signing key comes from the database, so both publish one JWKS and a
// rotation made by the CLI (on neither node's DATA_DIR) reaches both within the cache time.
const pg = await startPostgres();
t.teardown(() => pg.stop());
const nodes = await startNodes(t, 2, { DATABASE_URL: pg.url, WORKERS: '1' });
const [a, b] = nodes as [ServerHandle, ServerHandle];




t.test('two nodes, one JWKS; a verdict from A checks against B; `keys rotate` reaches both within the cache time', async (t) => {
  const { token } = await makeToken(a, ['rgb_liveness:100:day']);
  const [ja, jb] = await Promise.all([jwksOf(a), jwksOf(b)]);
  t.equal(ja.keys.length, 1, 'nodes that started together created one key');
  t.same(jb, ja, 'the same JWKS from both nodes');
  t.notOk('d' in ja.keys[0]!, 'no private part published');

  const fromA = await signedVerdict(a, token);
  const fromB = await signedVerdict(b, token);
  t.equal(fromA.kid, ja.keys[0]!.kid);
  t.equal(fromB.kid, fromA.kid, 'both nodes sign with the one key');
  t.ok(await check(jb, fromA.body, fromA.signature), 'a verdict signed by node A verifies against node B\'s JWKS');
  t.ok(await check(ja, fromB.body, fromB.signature), 'and the other way round');

  // the CLI runs with its own, empty DATA_DIR: the key it rotates can only be the shared one
  const rotated = await runCli(tempDir(), ['keys', 'rotate'], '', { DATABASE_URL: pg.url });
  t.equal(rotated.code, 0, rotated.stderr);
  t.equal(rotated.json.retired, fromA.kid);
  // The promise: a request that starts more than SHARED_KEY_CACHE_MS after the rotation
  // committed gets the new kid. Checked on each poll by its start time rather than by timing
  // the whole wait, so a slow request on a loaded machine cannot fail it.
  const committed = Date.now();
  const late: string[] = [];
  const poll = (n: ServerHandle, what: string, kids: () => Promise<string[]>) =>
    waitFor(
      async () => {
        const start = Date.now();
        const seen = await kids();
        const fresh = seen.includes(rotated.json.kid);
        if (!fresh && start > committed + SHARED_KEY_CACHE_MS) late.push(`${what} ${n.baseUrl} at +${start - committed} ms`);
        return fresh;
      },
      { timeoutMs: SHARED_KEY_CACHE_MS * 4, intervalMs: 200, what: `${n.baseUrl} ${what} the new kid` },
    );
  for (const n of nodes) {
    await poll(n, 'signing with', async () => [(await signedVerdict(n, token)).kid]);
    await poll(n, 'publishing', async () => (await jwksOf(n)).keys.map((k) => k.kid!));
    t.comment(`${n.baseUrl} signs with and publishes the new kid ${Date.now() - committed} ms after the rotation`);
  }
  t.same(late, [], 'no request started after the cache time got the old key set');
  const [ra, rb] = await Promise.all([jwksOf(a), jwksOf(b)]);
  t.same(ra, rb, 'one JWKS again');
  t.same(ra.keys.map((k) => k.kid).sort(), [fromA.kid, rotated.json.kid].sort(), 'the retired key stays published');
  const after = await signedVerdict(b, token);
  t.ok(await check(ra, after.body, after.signature), 'a verdict signed by B with the new key verifies against A\'s JWKS');
  t.ok(await check(rb, fromA.body, fromA.signature), 'a verdict signed before the rotation still verifies');

  const list = await runCli(tempDir(), ['keys', 'list'], '', { DATABASE_URL: pg.url });
  t.equal(list.code, 0, list.stderr);
  t.same(list.json.keys.map((k: { kid: string; current: boolean; published: boolean }) => [k.kid, k.current, k.published]), [
    [fromA.kid, false, true],
    [rotated.json.kid, true, true],
  ]);
});
