import net from 'node:net';
import pg from 'pg';
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

// The PostgreSQL twin of the reading commands' "no store here" refusal (a mistyped DATA_DIR:
// test/cli/arguments.test.ts). With DATABASE_URL naming a database the service never set up (a
// mistyped name of a database that exists, the server's default one), the store's open ran the
// migrations: the schema was created there, a node row written, and `user list` answered [] as
// if from the service's store. Now such a command refuses, exit 5, and creates nothing.

/** What a database holds outside PostgreSQL's own schemas: its tables and other relations,
 * and its functions (the service's rules are stored functions). */
async function contents(url: string): Promise<{ relations: string[]; functions: string[] }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const own = `NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`;
    const relations = (await c.query(`SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname ${own} ORDER BY 1`)).rows.map((r) => r.name as string);
    const functions = (await c.query(`SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname ${own} ORDER BY 1`)).rows.map((r) => r.name as string);
    return { relations, functions };
  } finally {
    await c.end();
  }
}

const READING = [['user', 'list'], ['token', 'list'], ['ledger', 'verify'], ['keys', 'list'], ['settlements', 'list'], ['audit', 'list'], ['retention', 'prune']];
const password = new URL(server.url).password;

t.test('a reading command on a database the service never set up: exit 5 naming the database, nothing created', async (t) => {
  const url = await server.database('never_set_up');
  for (const args of READING) {
    const r = await runCli(tempDir(), args, '', { DATABASE_URL: url });
    t.equal(r.code, 5, `${args.join(' ')}: ${r.stderr.trim()}`);
    t.match(r.stderr, /^error: no store in PostgreSQL database "never_set_up" at 127\.0\.0\.1:\d+: is DATABASE_URL right\? \(.*nothing was created\)\n$/);
    t.notOk(r.stderr.includes(password), 'the password is not shown');
    t.equal(r.stdout, '');
  }
  t.same(await contents(url), { relations: [], functions: [] }, 'no table, no function: no migration ran, no node row (the schema was created, and `user list` answered [])');
  // a URL without a database name: PostgreSQL's default (the user's name), told by the server
  const bare = new URL(server.url);
  bare.pathname = '';
  const r = await runCli(tempDir(), ['user', 'list'], '', { DATABASE_URL: bare.href });
  t.equal(r.code, 5, r.stderr.trim());
  t.match(r.stderr, /no store in PostgreSQL database "postgres" at /);
  t.same(await contents(bare.href), { relations: [], functions: [] });
});

t.test('a database holding another application\'s tables (its own schema_migrations too) is refused and left as it was', async (t) => {
  const url = await server.database('other_app');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query('CREATE TABLE schema_migrations (version varchar PRIMARY KEY); CREATE TABLE orders (id int)');
  await c.end();
  const r = await runCli(tempDir(), ['ledger', 'verify'], '', { DATABASE_URL: url });
  t.equal(r.code, 5, r.stderr.trim());
  t.match(r.stderr, /no store in PostgreSQL database "other_app"/);
  t.same((await contents(url)).relations, ['orders', 'schema_migrations', 'schema_migrations_pkey'], 'its tables only');
});

t.test('a database the service set up: the reading commands answer from it', async (t) => {
  const url = await server.database('set_up');
  const made = await runCli(tempDir(), ['token', 'create', '--name', 'kept', '--grant', 'rgb_liveness:5:day'], '', { DATABASE_URL: url });
  t.equal(made.code, 0, `a writing command sets the database up, as before: ${made.stderr}`);
  const list = await runCli(tempDir(), ['token', 'list'], '', { DATABASE_URL: url });
  t.equal(list.code, 0, list.stderr);
  t.same(list.json.tokens.map((x: { name: string }) => x.name), ['kept']);
  for (const args of READING) {
    const r = await runCli(tempDir(), args, '', { DATABASE_URL: url });
    t.equal(r.code, 0, `${args.join(' ')}: ${r.stderr.trim()}`);
  }
});

t.test('a database that cannot be reached, or does not exist, keeps its own error', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const closed = new URL(server.url);
  closed.port = String(port);
  const down = await runCli(tempDir(), ['user', 'list'], '', { DATABASE_URL: closed.href });
  t.equal(down.code, 5, down.stderr.trim());
  t.match(down.stderr, new RegExp(`^error: cannot open the PostgreSQL store at 127\\.0\\.0\\.1:${port}/lv: `));
  const missing = new URL(server.url);
  missing.pathname = '/no_such_db';
  const none = await runCli(tempDir(), ['user', 'list'], '', { DATABASE_URL: missing.href });
  t.equal(none.code, 5, none.stderr.trim());
  t.match(none.stderr, /^error: cannot open the PostgreSQL store at 127\.0\.0\.1:\d+\/no_such_db: .*database "no_such_db" does not exist/);
  for (const r of [down, none]) t.notOk(r.stderr.includes(password), 'the password is not shown');
});
