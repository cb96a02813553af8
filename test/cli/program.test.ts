import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CLI_ARGS, ROOT, runChild, runCli, runCliProcess, tempDir } from '../helpers/server.ts';
import { SERVICE_VERSION } from '../../src/version.ts';

// The CLI as a program (issue 43). Every other CLI test runs its commands in the test process
// (runCli: src/cli/main.ts's runCommand with the test's strings); what only a process of its
// own shows is here, run as `npm run cli` runs it (runCliProcess: dist/src/cli/main.js when
// the build is current, else src/cli/bin.ts through tsx): the exit status, stdout and stderr
// of the process, stdin piped in, the files it writes under the shell's usual umask, and a
// store that does not answer. test/cli/first-steps.test.ts runs the README's lines through sh
// (stdin from echo, stdout into a pipe). Each run here costs a start-up: add one only for what
// the process itself shows.

t.test('--version and --help answer on stdout and exit 0, opening no store', async (t) => {
  const dataDir = path.join(tempDir(), 'data');
  const v = await runCliProcess(dataDir, ['--version']);
  t.equal(v.code, 0, v.stderr);
  t.same(v.json, { version: SERVICE_VERSION });
  const h = await runCliProcess(dataDir, ['--help']);
  t.equal(h.code, 0, h.stderr);
  t.match(h.stdout, /^usage: npm run cli --silent -- <command>/);
  t.match(h.stdout, /exit codes: 0 done; 1 .* 5 store unavailable/);
  t.equal(h.stderr, '');
  t.notOk(fs.existsSync(dataDir), 'nothing written');
});

t.test('a refusal\'s exit code reaches the shell, its message on stderr', async (t) => {
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  // a DATA_DIR with a store (a reading command refuses one without: exit 5)
  const withStore = tempDir();
  t.equal((await runCli(withStore, ['db', 'migrate'])).code, 0);
  const r = await runChild('sh', ['-c', `${[process.execPath, ...CLI_ARGS].map(quote).join(' ')} token show nobody`], { cwd: ROOT, env: { ...process.env, DATA_DIR: withStore } });
  t.equal(r.code, 3, 'not found: 3, as $? in the shell');
  t.equal(r.stdout, '');
  t.equal(r.stderr, 'error: unknown token "nobody" (neither an id nor a name)\n', 'one line, no stack');
});

t.test('stdin piped in: user create reads the password from it', async (t) => {
  const r = await runCliProcess(tempDir(), ['user', 'create', 'ops', '--role', 'admin'], 'a-long-password\n');
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { username: 'ops', role: 'admin' });
  t.notMatch(r.stdout, /a-long-password/, 'the password is not echoed');
});

t.test('under umask 022 every folder and file the program writes is private (issue 29)', async (t) => {
  // the child inherits this process's umask, as it would a shell's
  const before = process.umask(0o022);
  t.teardown(() => void process.umask(before));
  const dataDir = path.join(tempDir(), 'data');
  // a model-set request: its folder and file take their modes from the umask alone
  const r = await runCliProcess(dataDir, ['models', 'activate', 'raw_v1']);
  t.equal(r.code, 0, r.stderr);
  const entries = [dataDir, ...fs.readdirSync(dataDir, { recursive: true, encoding: 'utf8' }).map((p) => path.join(dataDir, p))];
  const rel = (p: string) => path.relative(dataDir, p) || '.';
  t.ok(entries.some((p) => p.endsWith('request.json')), 'the request is written');
  for (const want of ['store', 'store/data.mdb']) t.ok(entries.map(rel).includes(want), `${want} written`);
  const open = entries.map((p) => ({ p, st: fs.lstatSync(p) })).filter(({ st }) => (st.mode & 0o777) !== (st.isDirectory() ? 0o700 : 0o600));
  t.same(open.map(({ p, st }) => `${rel(p)} ${(st.mode & 0o777).toString(8)}`), [], 'folders 0700, files 0600');
});

t.test('a store that does not answer: exit 5, one line on stderr', async (t) => {
  const r = await runCliProcess(tempDir(), ['token', 'list'], '', { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
  t.equal(r.code, 5, r.stderr);
  t.equal(r.stdout, '');
  t.match(r.stderr, /^error: .+\n$/);
});
