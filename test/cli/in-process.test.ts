import fs from 'node:fs';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';
import { now } from '../../src/clock.ts';
import { runCommand, type CliIo } from '../../src/cli/main.ts';

// The CLI run inside a test process (issue 43: runCli calls src/cli/main.ts's runCommand
// instead of starting a process per command). A process of its own exits after one command
// and takes what it changed with it; a call must put back what it changes for the whole
// process, close what it opens, and never set the process's exit code. test/cli/program.test.ts
// checks the program itself.

/** this process's umask, read without changing it for longer than the call */
function currentUmask(): number {
  const mask = process.umask(0o022);
  process.umask(mask);
  return mask;
}

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

t.test('what a command writes is private; the process gets its own umask back', async (t) => {
  const before = process.umask(0o022);
  t.teardown(() => void process.umask(before));
  const dataDir = path.join(tempDir(), 'data');
  // a model-set request: its folder and file take their modes from the umask alone
  const r = await runCli(dataDir, ['models', 'activate', 'raw_v1']);
  t.equal(r.code, 0, r.stderr);
  const written = [dataDir, ...fs.readdirSync(dataDir, { recursive: true, encoding: 'utf8' }).map((p) => path.join(dataDir, p))];
  t.ok(written.some((p) => p.endsWith('request.json')), 'the request is written');
  const open = written.map((p) => ({ p, st: fs.statSync(p) })).filter(({ st }) => (st.mode & 0o777) !== (st.isDirectory() ? 0o700 : 0o600));
  t.same(open.map(({ p, st }) => `${path.relative(dataDir, p)} ${(st.mode & 0o777).toString(8)}`), [], 'folders 0700, files 0600');
  t.equal(currentUmask(), 0o022, 'the umask is the process\'s again');
  // commands at once share the private umask; it comes back after the last
  const runs = await Promise.all([runCli(dataDir, ['keys', 'list']), runCli(dataDir, ['token', 'list']), runCli(dataDir, ['token', 'show', 'nobody'])]);
  t.same(runs.map((x) => x.code), [0, 0, 3]);
  t.equal(currentUmask(), 0o022, 'after commands that ran at once too');
  const mine = path.join(tempDir(), 'mine.txt');
  fs.writeFileSync(mine, 'x');
  t.equal(fs.statSync(mine).mode & 0o777, 0o644, 'a file this process writes afterwards has its usual mode');
  t.equal(process.exitCode, undefined, 'no command set the process\'s exit code (one answered 3)');
});

t.test('CLOCK_FILE in the command\'s environment is its clock, for that command only', async (t) => {
  const dataDir = tempDir();
  const clock = path.join(tempDir(), 'clock');
  fs.writeFileSync(clock, '2031-02-03T04:05:06.000Z');
  const made = await runCli(dataDir, ['token', 'create', '--name', 'clocked'], '', { CLOCK_FILE: clock });
  t.equal(made.code, 0, made.stderr);
  t.equal(made.json.created_at, '2031-02-03T04:05:06.000Z', 'the record carries the file\'s time');
  const expired = await runCli(dataDir, ['token', 'expire', 'clocked'], '', { CLOCK_FILE: clock });
  t.equal(expired.json.expires_at, '2031-02-03T04:05:06.000Z', '"now" is the file\'s time');
  t.ok(Math.abs(now() - Date.now()) < 60_000, 'this process\'s clock is its own again');
  const plain = await runCli(dataDir, ['token', 'create', '--name', 'plain']);
  t.ok(Math.abs(Date.parse(plain.json.created_at) - Date.now()) < 60_000, 'a command without CLOCK_FILE reads the real time');
});

t.test('an unexpected error: exit 1 with its stack on stderr; the store is closed and the process untouched', async (t) => {
  const dataDir = tempDir();
  const out = sink();
  const err = sink();
  // a stdin that fails while `user create` reads it: no refusal the CLI knows, so unexpected
  const stdin = new Readable({
    read() {
      this.destroy(new Error('stdin broke'));
    },
  });
  const io: CliIo = { env: { ...process.env, DATA_DIR: dataDir }, cwd: process.cwd(), stdin, stdout: out.stream, stderr: err.stream };
  const code = await runCommand(['user', 'create', 'ops'], io);
  t.equal(code, 1);
  t.match(err.text(), /^Error: stdin broke\n\s+at /, 'the stack, as an uncaught error prints it');
  t.equal(out.text(), '');
  t.equal(process.exitCode, undefined);
  // the store it opened was closed: the next command opens it again and finds no user
  const list = await runCli(dataDir, ['user', 'list']);
  t.equal(list.code, 0, list.stderr);
  t.same(list.json, { users: [] });
});

t.test('a command that reports a failed outcome: exit 1 with its answer on stdout', async (t) => {
  const dataDir = tempDir();
  const empty = path.join(tempDir(), 'no-set');
  fs.mkdirSync(empty);
  const r = await runCli(dataDir, ['models', 'check', empty]);
  t.equal(r.code, 1, r.stderr);
  t.same(r.json, { ok: false }, 'the answer is still printed');
  t.ok(r.stderr.length > 0, 'the report is on stderr');
  t.equal(process.exitCode, undefined, 'the process\'s exit code is not the command\'s');
});

// review3b (docs): `models check` of a folder that is not there was exit 1 (a set that failed
// its checks), not 3 (not found) as `models activate` of an unknown set is; and a path typed in
// another folder was resolved from the package folder, where `capture` resolved from the
// folder `npm run` was typed in (INIT_CWD). Every file named on the command line is now the
// operator's.
t.test('files on the command line: from where npm run was typed (INIT_CWD); a model set folder not there is 3', async (t) => {
  const dataDir = tempDir();
  const missing = await runCli(dataDir, ['models', 'check', path.join(tempDir(), 'nosuch')]);
  t.equal(missing.code, 3, missing.stderr);
  t.match(missing.stderr, /^error: no model set folder at /);
  const typedIn = tempDir();
  fs.mkdirSync(path.join(typedIn, 'my-set'));
  const relative = await runCli(dataDir, ['models', 'check', 'my-set'], '', { INIT_CWD: typedIn });
  t.equal(relative.code, 1, 'found where it was typed (an empty folder: its checks fail, exit 1, not 3)');
  t.match(relative.stderr, new RegExp(path.join(typedIn, 'my-set').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
});
