import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';

// The CLI's arguments (review 2026-11-30): a command that takes a fixed few plain arguments
// (Command.positional) refuses an option or one too many before doing anything (exit 2), where
// they were dropped and `keys rotate --dry-run` rotated the key; `--` ends the options; a name
// that is another token's id is ambiguous (exit 4), where the id silently won; a mistyped
// DATA_DIR gets no store from a command that only reads; operator-made file errors are one line.
const dataDir = tempDir();
const cli = (...args: string[]) => runCli(dataDir, args);
const created = await cli('token', 'create', '--name', 'spare', '--grant', 'rgb_liveness:1:day');
t.equal(created.code, 0, created.stderr);
t.equal((await cli('keys', 'rotate')).code, 0, 'a signing key');

t.test('an option or an extra argument is refused before anything is done', async (t) => {
  const current = async () => (await cli('keys', 'list')).json.keys.find((k: { current: boolean }) => k.current).kid as string;
  const before = await current();
  for (const args of [['keys', 'rotate', '--dry-run'], ['token', 'revoke', 'spare', 'extra'], ['token', 'revoke', 'spare', '--dry-run'], ['module', 'disable', 'rgb_liveness', '--dry-run'], ['retention', 'prune', '--dry-run'], ['token', 'list', '--bogus'], ['grant', 'set', 'spare', 'rgb_liveness', '5', 'day', 'extra']]) {
    const r = await cli(...args);
    t.equal(r.code, 2, `${args.join(' ')}: usage error (${r.stderr.trim()})`);
    t.match(r.stderr, /nothing was done/);
  }
  t.equal(await current(), before, 'the key was not rotated');
  t.match((await cli('token', 'show', 'spare')).json, { enabled: true, revoked: false }, 'the token is as it was');
  t.equal((await cli('token', 'show', 'spare')).json.grants[0].limit, 1, 'its grant too');
  const modules = (await cli('usage', 'spare')).code;
  t.equal(modules, 0);
});

t.test('-- ends the options: a token named -h is named after it', async (t) => {
  t.equal((await cli('token', 'create', '--name=-h', '--grant', 'rgb_liveness:1:day')).code, 0);
  const shown = await cli('token', 'show', '--', '-h');
  t.equal(shown.code, 0, shown.stderr);
  t.equal(shown.json.name, '-h');
  const revoked = await cli('token', 'revoke', '--', '-h');
  t.equal(revoked.code, 0, revoked.stderr);
  t.equal(revoked.json.revoked, true, 'revoked (it printed the usage and did nothing)');
});

t.test('a name that is another token\'s id is ambiguous: exit 4, nothing done', async (t) => {
  const victim = await cli('token', 'create', '--name', 'victim', '--grant', 'rgb_liveness:1:day');
  const id = victim.json.id as string;
  t.equal((await cli('token', 'create', '--name', id, '--grant', 'rgb_liveness:1:day')).code, 0);
  const r = await cli('token', 'revoke', id);
  t.equal(r.code, 4, r.stderr.trim());
  t.match(r.stderr, /is the id of one token and the name of/);
  t.equal((await cli('token', 'show', 'victim')).json.revoked, false, 'the token whose id it is was not revoked');
});

t.test('a mistyped DATA_DIR: the reading commands create nothing; operator file errors are one line', async (t) => {
  const typo = path.join(tempDir(), 'typo');
  for (const args of [['user', 'list'], ['keys', 'list']]) {
    const r = await runCli(typo, args);
    t.equal(r.code, 5, `${args.join(' ')}: ${r.stderr.trim()}`);
  }
  t.equal((await runCli(typo, ['models', 'status'])).code, 0, 'models status reads no store');
  t.notOk(fs.existsSync(typo), 'nothing was created');
  const calibrate = await cli('models', 'calibrate', 'nosuch', '--live', dataDir, '--attack', dataDir);
  t.equal(calibrate.code, 3, `a model set that does not exist is not found (${calibrate.stderr.trim()})`);
  // a keys folder whose current key file is missing
  fs.writeFileSync(path.join(dataDir, 'keys', 'current'), 'nosuchkid\n');
  const keys = await cli('keys', 'list');
  t.ok(keys.code === 2 && !/\n\s+at /.test(keys.stderr), `one line, no stack: ${keys.stderr.trim()}`);
});
