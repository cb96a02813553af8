import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';
import { SERVICE_VERSION } from '../../src/version.ts';

// Issue 25, the CLI an operator meets first: --version, help that is an answer (exit 0) on
// every command, tokens by name, and exit codes a script can tell apart.
const dataDir = tempDir();

t.test('--version and help exit 0 and print to stdout', async (t) => {
  const v = await runCli(dataDir, ['--version']);
  t.equal(v.code, 0);
  t.same(v.json, { version: SERVICE_VERSION });
  for (const args of [['--help'], ['token', 'create', '--help'], ['keys', 'revoke', '-h']]) {
    const r = await runCli(dataDir, args);
    t.equal(r.code, 0, `${args.join(' ') || '(nothing)'} exits 0`);
    t.match(r.stdout, /usage: npm run cli --silent -- /, `${args.join(' ')}: usage on stdout`);
    if (args[0] === 'token') t.match(r.stdout, /token create --name NAME/, 'the command\'s own usage');
    t.match(r.stdout, /exit codes: 0 done; 1 .* 2 usage or configuration; 3 not found; 4 conflict; 5 store unavailable/);
  }
  // help asked of a family's first word (review3b: `token -h` was exit 2, "unknown command")
  for (const args of [['token', '-h'], ['models', '--help']]) {
    const r = await runCli(dataDir, args);
    t.equal(r.code, 0, `${args.join(' ')} exits 0`);
    t.match(r.stdout, args[0] === 'token' ? /token create --name NAME[\s\S]*token revoke/ : /models activate/, `${args.join(' ')}: the family's usages`);
    t.notMatch(r.stdout, args[0] === 'token' ? /user create/ : /token create/, 'and no other family\'s');
  }
  const unknown = await runCli(dataDir, ['frobnicate']);
  t.equal(unknown.code, 2, 'an unknown command is a usage error');
  t.match(unknown.stderr, /^error: unknown command "frobnicate"\n\nusage:/, 'the refused word first, then the usage');
  const unknownSub = await runCli(dataDir, ['token', 'frobnicate']);
  t.equal(unknownSub.code, 2);
  t.match(unknownSub.stderr, /^error: unknown command "token frobnicate" \(token takes: create, list, show, disable, enable, expire, revoke\)\n/, 'a family names its own commands');
  t.match((await runCli(dataDir, ['session'])).stderr, /^error: "session" needs a command \(session takes: list, revoke\)/);
  t.equal((await runCli(dataDir, ['token', 'create', '--name', 'x', '--bogus'])).code, 2, 'an unknown option is a usage error');
});

t.test('tokens by id or by name; not found 3, conflict 4', async (t) => {
  const made = await runCli(dataDir, ['token', 'create', '--name', 'Lobby Kiosk', '--grant', 'rgb_liveness:5:day']);
  t.equal(made.code, 0, made.stderr);
  const byName = await runCli(dataDir, ['token', 'show', 'Lobby Kiosk']);
  t.equal(byName.code, 0, byName.stderr);
  t.equal(byName.json.id, made.json.id);
  t.equal((await runCli(dataDir, ['token', 'show', 'lobby kiosk'])).json.id, made.json.id, 'case ignored, as names are unique');
  t.equal((await runCli(dataDir, ['grant', 'set', 'Lobby Kiosk', 'rgb_liveness', '9', 'day'])).code, 0);
  t.match((await runCli(dataDir, ['usage', 'Lobby Kiosk'])).json, { tokens: [{ id: made.json.id, usage: [{ module_id: 'rgb_liveness', limit: 9 }] }] });
  t.equal((await runCli(dataDir, ['token', 'disable', 'Lobby Kiosk'])).json.enabled, false);
  const missing = await runCli(dataDir, ['token', 'show', 'nobody']);
  t.equal(missing.code, 3);
  t.match(missing.stderr, /unknown token "nobody" \(neither an id nor a name\)/);
  const taken = await runCli(dataDir, ['token', 'create', '--name', 'lobby kiosk']);
  t.equal(taken.code, 4);
  t.equal((await runCli(dataDir, ['token', 'revoke', made.json.id])).code, 0);
  t.equal((await runCli(dataDir, ['token', 'enable', 'Lobby Kiosk'])).code, 4, 'a revoked token cannot be enabled: conflict');
  t.equal((await runCli(dataDir, ['settlements', 'resolve', 'rsv_nope', 'refund'])).code, 3);
  // the lists take a token by name too; an unknown one is not an empty list (exit 0, read by a
  // billing script as no usage) but exit 3
  for (const list of ['ledger', 'audit']) {
    const byName = await runCli(dataDir, [list, 'list', '--token', 'lobby kiosk']);
    t.equal(byName.code, 0, byName.stderr);
    t.same(byName.json, (await runCli(dataDir, [list, 'list', '--token', made.json.id])).json, `${list} list: the name reads the id's list`);
    const unknown = await runCli(dataDir, [list, 'list', '--token', 'nobody']);
    t.equal(unknown.code, 3, `${list} list --token nobody: not found`);
    t.match(unknown.stderr, /unknown token "nobody" \(neither an id nor a name\)/);
  }
});

t.test('the CLI takes what the API takes: user names, passwords, times with their zone (usage error 2 otherwise, nothing written)', async (t) => {
  for (const name of ['has space', 'a<b>', 'x'.repeat(65)]) {
    const r = await runCli(dataDir, ['user', 'create', name], 'a-long-password\n');
    t.equal(r.code, 2, `username ${JSON.stringify(name)}`);
  }
  t.match((await runCli(dataDir, ['user', 'create', 'has space'], 'a-long-password\n')).stderr, /username must be 1 to 64 of A-Z a-z 0-9 _ \. @ -/);
  const long = await runCli(dataDir, ['user', 'create', 'long-pw'], `${'p'.repeat(1025)}\n`);
  t.equal(long.code, 2, 'a password the login would refuse (over 1,024 characters)');
  t.match(long.stderr, /8 to 1024 characters/);
  t.equal((await runCli(dataDir, ['user', 'create', 'short-pw'], 'short\n')).code, 2);
  t.equal((await runCli(dataDir, ['user', 'create', 'max-pw'], `${'p'.repeat(1024)}\n`)).code, 0, '1,024 characters are taken');
  t.notOk((await runCli(dataDir, ['user', 'list'])).json.users.some((u: { username: string }) => ['has space', 'long-pw', 'short-pw'].includes(u.username)), 'none of the refused was made');

  for (const at of ['2027-01-01T10:00', '2027-01-01', 'tomorrow', '2027-01-01T10:00:00+1']) {
    const r = await runCli(dataDir, ['token', 'create', '--name', `tz-${at}`, '--expires', at]);
    t.equal(r.code, 2, `--expires ${at}: no zone, no time`);
    t.match(r.stderr, /with its zone/);
  }
  // with its zone, one text is one instant on any host, as the API stores it
  const made = await runCli(dataDir, ['token', 'create', '--name', 'tz-ok', '--expires', '2027-01-01T10:00:00+09:00']);
  t.equal(made.code, 0, made.stderr);
  t.equal(made.json.expires_at, '2027-01-01T01:00:00.000Z');
  t.equal((await runCli(dataDir, ['token', 'expire', 'tz-ok', '--at', '2027-02-01T00:00'])).code, 2, 'token expire --at likewise');
  t.equal((await runCli(dataDir, ['token', 'expire', 'tz-ok', '--at', '2027-02-01T00:00:00Z'])).json.expires_at, '2027-02-01T00:00:00.000Z');
});

t.test('a store that cannot be opened: 5', async (t) => {
  const r = await runCli(dataDir, ['token', 'list'], '', { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
  t.equal(r.code, 5, r.stderr);
});
