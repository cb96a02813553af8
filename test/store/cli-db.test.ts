import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { MIGRATIONS } from '../../src/store/pg/migrations.ts';

// every migration in the build, so a new one needs no edit here
const VERSIONS = MIGRATIONS.map((m) => m.version);
const LATEST = VERSIONS[VERSIONS.length - 1];

const server = await startPostgres();
t.teardown(() => server.stop());

t.test('db migrate on PostgreSQL applies the schema once, then finds nothing to do', async (t) => {
  const dir = tempDir();
  const first = await runCli(dir, ['db', 'migrate'], '', { DATABASE_URL: server.url });
  t.equal(first.code, 0, first.stderr);
  t.same(first.json, { store: 'postgres', schema_version: LATEST, applied: VERSIONS });
  const again = await runCli(dir, ['db', 'migrate'], '', { DATABASE_URL: server.url });
  t.same(again.json, { store: 'postgres', schema_version: LATEST, applied: [] });
});

t.test('db migrate without DATABASE_URL checks the LMDB store, and has its pruners index it again', async (t) => {
  const r = await runCli(tempDir(), ['db', 'migrate'], '', { DATABASE_URL: '' });
  t.equal(r.code, 0, r.stderr);
  // what a build older than the expiry index wrote is indexed by the next pass (store/lmdb/expiry.ts;
  // the pass itself: test/store/lmdb-prune-scan.test.ts)
  t.same(r.json, { store: 'lmdb', schema_version: 1, applied: [], reindex_at_next_prune: ['idempotency', 'reservations', 'results', 'deviceSessions'] });
});

t.test('a DATABASE_URL that is not PostgreSQL is a usage error, not a silent local store', async (t) => {
  const r = await runCli(tempDir(), ['db', 'migrate'], '', { DATABASE_URL: 'mysql://x@y/z' });
  t.equal(r.code, 2);
  t.match(r.stderr, /DATABASE_URL/);
});
