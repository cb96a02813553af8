import path from 'node:path';
import { parseArgs } from 'node:util';
import { Value } from '@sinclair/typebox/value';
import { compileCodePoints, isNameText, NAME_TEXT_RULE } from '../packets/index.ts';
import { adminSchemas, createToken, DuplicateTokenNameError, duplicateGrantIndex, listTokenViews, patchToken, removeGrant, revokeToken, RevokedTokenError, setGrant, tokenDetail, addUser, listUserViews, isModuleId } from '../admin/index.ts';
import { clockOffset, isoNow, now, setClockFile, setClockOffset } from '../clock.ts';
import { loadConfig } from '../config/index.ts';
import { MODULE_IDS, type ModuleId } from '../contract/index.ts';
import { activeSessions, revokeSessionById } from '../sessions/index.ts';
import { type CallerReads, type StoreBackend, type TokenAdmin, openConfiguredStore, privateUmask, type Grant, type Period, DuplicateUserError, StoreError } from '../store/index.ts';
import { lmdbStoreExists } from '../store/lmdb/index.ts';
import { extraCommands } from './extra.ts';
import { ConflictError, EXIT, exitCodeOf, NotFoundError, UsageError } from './errors.ts';
import { TextOutput, type CliIo, type Command } from './command.ts';
import { tokenId } from './token-ref.ts';
import { captureCommands } from './capture.ts';
import { SERVICE_VERSION } from '../version.ts';
import { printable, printableStream } from './printable.ts';

// Operator CLI over the same store as a running server: LMDB in DATA_DIR (LMDB allows several
// processes) or PostgreSQL at DATABASE_URL.
// Every command prints JSON on stdout; failures print one line on stderr and exit 1.
// runCommand() is the whole CLI as a call: bin.ts, the program `npm run cli` starts, hands it
// the process's streams, environment and folder; a test hands it strings and runs it in its own
// process (runCli in bench/harness/server.ts), which saves a start-up per command (issue 43).

export type { CliContext, CliIo, Command } from './command.ts';

function moduleId(v: string | undefined): ModuleId {
  if (!v || !isModuleId(v)) throw new UsageError(`module must be one of ${MODULE_IDS.join(', ')} (got ${v ?? 'nothing'})`);
  return v;
}

function limitOf(v: string | undefined): number | null {
  if (v === 'unlimited' || v === 'null') return null;
  if (v === undefined || !/^\d+$/.test(v) || Number(v) > 2 ** 31 - 1) throw new UsageError(`limit must be a non-negative integer or "unlimited" (got ${v ?? 'nothing'})`);
  return Number(v);
}

function periodOf(v: string | undefined): Period {
  if (v !== 'day' && v !== 'month' && v !== 'never') throw new UsageError(`period must be day, month or never (got ${v ?? 'nothing'})`);
  return v;
}

/** "module:limit:period", e.g. rgb_liveness:1000:day or color_liveness:unlimited:never */
function grantOf(spec: string): Grant {
  const [m, l, p] = spec.split(':');
  return { module_id: moduleId(m), limit: limitOf(l), period: periodOf(p) };
}

/** A time as the administration API takes it (adminSchemas.ExpiresAtSchema): with its zone
 * (`Z` or an offset) and a four-digit UTC year. Date.parse alone read a time without a zone as
 * the host's local time, so the same command stored different instants on different hosts. */
function isoOf(v: string, what: string): string {
  if (!Value.Check(adminSchemas.ExpiresAtSchema, v)) {
    throw new UsageError(`${what} must be an ISO 8601 time with its zone, Z or an offset, e.g. 2027-01-01T10:00:00Z (got ${v})`);
  }
  return new Date(Date.parse(v)).toISOString();
}

// 8 to 1,024 characters, counted in code points as POST /admin/api/users counts them (a
// password of 4 emoji is 8 UTF-16 units, and Value.Check took it)
const passwordCheck = compileCodePoints(adminSchemas.PasswordSchema);

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new NotFoundError(`unknown ${what}`);
  return value;
}

async function readStdin(stdin: CliIo['stdin']): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : c);
  return Buffer.concat(chunks).toString('utf8');
}

const commands: Record<string, Command> = {
  'user create': {
    usage: 'user create <username> [--role admin|user]   (password read from stdin)',
    async run(store, args, ctx) {
      const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { role: { type: 'string', default: 'admin' } } });
      const username = positionals[0];
      if (!username) throw new UsageError('username required');
      if (values.role !== 'admin' && values.role !== 'user') throw new UsageError('role must be admin or user');
      // the rules of POST /admin/api/users and ADMIN_USERNAME/ADMIN_PASSWORD: an account made
      // here with a longer password could never log in (the login takes 1,024 characters)
      if (!Value.Check(adminSchemas.UsernameSchema, username)) throw new UsageError('username must be 1 to 64 of A-Z a-z 0-9 _ . @ -');
      const password = (await readStdin(ctx.stdin)).split(/\r?\n/)[0] ?? '';
      if (!passwordCheck.Check(password)) throw new UsageError('password (first line of stdin) must have 8 to 1024 characters');
      try {
        return await addUser(store, { username, password, role: values.role });
      } catch (e) {
        if (e instanceof DuplicateUserError) throw new ConflictError(e.message);
        throw e;
      }
    },
  },
  'user list': { positional: 0, existingStore: true, usage: 'user list', run: async (store) => ({ users: await listUserViews(store) }) },
  'token create': {
    usage: 'token create --name NAME [--grant module:limit|unlimited:day|month|never]... [--expires ISO] [--demo]   (prints the plaintext once)',
    async run(store, args) {
      const { values } = parseArgs({ args, options: { name: { type: 'string' }, grant: { type: 'string', multiple: true }, expires: { type: 'string' }, demo: { type: 'boolean' } } });
      if (!values.name) throw new UsageError('--name required');
      if (!isNameText(values.name) || [...values.name].length > 200) throw new UsageError(`--name must be 1 to 200 characters of ${NAME_TEXT_RULE}`);
      const grants = (values.grant ?? []).map(grantOf);
      const twice = duplicateGrantIndex(grants);
      if (twice >= 0) throw new UsageError(`${grants[twice]!.module_id} is granted twice; each module may be granted once`);
      try {
        const { token, plaintext } = await createToken(store, { name: values.name, grants, demo: values.demo ?? false, expires_at: values.expires ? isoOf(values.expires, '--expires') : null });
        return { ...token, token: plaintext };
      } catch (e) {
        if (e instanceof DuplicateTokenNameError) throw new ConflictError(e.message);
        throw e;
      }
    },
  },
  'token list': { positional: 0, existingStore: true, usage: 'token list', run: async (store) => ({ tokens: await listTokenViews(store) }) },
  'token show': { positional: 1, existingStore: true, usage: 'token show <token_id|name>', run: async (store, [ref]) => need(await tokenDetail(store, await tokenId(store, ref)), 'token') },
  'token disable': { positional: 1, usage: 'token disable <token_id|name>', run: async (store, [ref]) => need(await patchToken(store, await tokenId(store, ref), { enabled: false }), 'token') },
  'token enable': {
    positional: 1,
    usage: 'token enable <token_id|name>',
    run: async (store, [ref]) => {
      try {
        return need(await patchToken(store, await tokenId(store, ref), { enabled: true }), 'token');
      } catch (e) {
        if (e instanceof RevokedTokenError) throw new ConflictError(e.message);
        throw e;
      }
    },
  },
  'token expire': {
    usage: 'token expire <token_id|name> [--at ISO]   (default: now)',
    async run(store, args) {
      const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { at: { type: 'string' } } });
      return need(await patchToken(store, await tokenId(store, positionals[0]), { expires_at: values.at ? isoOf(values.at, '--at') : isoNow() }), 'token');
    },
  },
  'token revoke': { positional: 1, usage: 'token revoke <token_id|name>', run: async (store, [ref]) => need(await revokeToken(store, await tokenId(store, ref)), 'token') },
  'grant set': {
    positional: 4,
    usage: 'grant set <token_id|name> <module_id> <limit|unlimited> <day|month|never>',
    run: async (store, [ref, m, l, p]) => need(await setGrant(store, await tokenId(store, ref), { module_id: moduleId(m), limit: limitOf(l), period: periodOf(p) }), 'token'),
  },
  'grant remove': {
    positional: 2,
    usage: 'grant remove <token_id|name> <module_id>',
    async run(store, [ref, m]) {
      const removed = need(await removeGrant(store, await tokenId(store, ref), moduleId(m)), 'token');
      return { removed };
    },
  },
  usage: {
    positional: 1,
    existingStore: true,
    usage: 'usage [<token_id|name>]   (usage snapshots of one token or of all)',
    async run(store, [ref]) {
      const at = now();
      const tokens = ref ? [need(await store.getToken(await tokenId(store, ref)), 'token')] : await store.listTokens();
      const out = [];
      for (const t of tokens) out.push({ id: t.id, name: t.name, usage: await store.usageSnapshot(t, at) });
      return { tokens: out };
    },
  },
  'module enable': { positional: 1, usage: 'module enable <module_id>', run: async (store, [m]) => (await store.setModuleEnabled(moduleId(m), true), { module_id: m, enabled: true }) },
  'module disable': { positional: 1, usage: 'module disable <module_id>', run: async (store, [m]) => (await store.setModuleEnabled(moduleId(m), false), { module_id: m, enabled: false }) },
  'session list': {
    positional: 1,
    existingStore: true,
    usage: 'session list <token_id|name>   (the device sessions of a token usable now, newest first, at most 100)',
    run: async (store, [ref]) => ({ sessions: await activeSessions(store, need(await store.getToken(await tokenId(store, ref)), 'token'), now()) }),
  },
  'session revoke': {
    positional: 1,
    usage: 'session revoke <session_id>   (one device session ends at once; the token and its other sessions keep working)',
    async run(store, [id]) {
      if (!id) throw new UsageError('a session id (ses_...) is required: session list <token> shows them, and the audit log names them');
      return need(await revokeSessionById(store, id, now()), `session ${JSON.stringify(id)}`);
    },
  },
  ...captureCommands,
  ...extraCommands,
};

const EXIT_HELP = `exit codes: ${EXIT.ok} done; ${EXIT.failed} the command ran and reports a failure (or an unexpected error); ${EXIT.usage} usage or configuration; ${EXIT.not_found} not found; ${EXIT.conflict} conflict; ${EXIT.store_unavailable} store unavailable`;

function help(): string {
  return `usage: npm run cli --silent -- <command> [--help]   (JSON on stdout; messages on stderr)\n\n${Object.values(commands).map((c) => `  ${c.usage}`).join('\n')}\n\n  --version\n\n${EXIT_HELP}\n`;
}

const HELP_FLAGS = new Set(['-h', '--help']);

/** A command's plain arguments (Command.positional): an option before `--`, or more than it
 * takes, is refused. */
function plainArguments(name: string, args: readonly string[], most: number): string[] {
  const end = args.indexOf('--');
  const before = end === -1 ? args : args.slice(0, end);
  const option = before.find((a) => a.startsWith('-') && a.length > 1);
  if (option !== undefined) throw new UsageError(`${name} takes no option ${JSON.stringify(option)} (nothing was done); an argument that starts with - goes after --`);
  const plain = end === -1 ? [...args] : [...before, ...args.slice(end + 1)];
  if (plain.length > most) throw new UsageError(`${name} takes ${most === 0 ? 'no argument' : `at most ${most} argument${most === 1 ? '' : 's'}`}; got ${plain.length} (nothing was done)`);
  return plain;
}

/** What was not understood: the first word, or, when the first word names a family of
 * commands (token, models ...), the pair and the family's own commands. */
function unknownCommand(argv: string[]): string {
  const first = argv[0]!;
  const family = Object.keys(commands).filter((n) => n.startsWith(`${first} `)).map((n) => n.slice(first.length + 1));
  if (family.length === 0) return `unknown command ${JSON.stringify(first)}`;
  const takes = `(${first} takes: ${family.join(', ')})`;
  return argv[1] === undefined ? `${JSON.stringify(first)} needs a command ${takes}` : `unknown command ${JSON.stringify(`${first} ${argv[1]}`)} ${takes}`;
}

// What a command changes for the whole process, and puts back when it ends: the umask (the
// keys, backups and model-set requests it writes are the operator's alone, issue 29) and the
// clock (CLOCK_FILE from its environment; the database's clock offset a PostgreSQL store
// measures). The binary would not need to put anything back, as it exits; a test process that
// runs commands in-process would otherwise write every later file 0600 and read its clock from
// a CLOCK_FILE it never set. Commands running at once in one process (a test's Promise.all)
// share one hold: the first sets, the last puts back, so the umask is 077 while any of them
// runs (each command's files are private) and the process's own comes back after the last;
// they share the first one's CLOCK_FILE, which a process running commands for two clocks at
// once could not keep apart anyway.
let holds = 0;
let before: { umask: number | null; clockFile: string | undefined; clockOffset: number } | null = null;

function holdProcessState(env: NodeJS.ProcessEnv): () => void {
  if (holds++ === 0) {
    // the offset a command's PostgreSQL store measures is its own; the process's comes back after
    before = { umask: privateUmask(), clockFile: setClockFile(env.CLOCK_FILE || undefined), clockOffset: clockOffset() };
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holds > 0 || before === null) return;
    if (before.umask !== null) process.umask(before.umask);
    setClockFile(before.clockFile);
    setClockOffset(before.clockOffset);
    before = null;
  };
}

/** Runs one CLI command (`argv` as typed after `npm run cli --`) with `io` as its streams,
 * environment and folder, and answers its exit code (EXIT in errors.ts). It never exits the
 * process and touches no process-wide state it does not put back (holdProcessState); every
 * store it opens is closed before it answers. An unexpected error is its stack on stderr
 * and exit 1, as an uncaught one is in a process of its own. */
export async function runCommand(argv: string[], given: CliIo): Promise<number> {
  // stderr quotes outside text (printable.ts); stdout is JSON
  const io: CliIo = { ...given, stderr: printableStream(given.stderr) };
  if (argv[0] === '--version' || argv[0] === '-v') {
    io.stdout.write(`${JSON.stringify({ version: SERVICE_VERSION })}\n`);
    return EXIT.ok;
  }
  const name = [argv.slice(0, 2).join(' '), argv[0] ?? ''].find((n) => n in commands);
  if (!name) {
    const asked = argv.length === 0 || argv[0] === 'help' || HELP_FLAGS.has(argv[0]!);
    if (asked) {
      io.stdout.write(help());
      return EXIT.ok;
    }
    // help asked of a command's first word (`token -h`): that family's usages, an answer too
    const family = Object.entries(commands).filter(([n]) => n.startsWith(`${argv[0]} `));
    if (family.length > 0 && argv.length === 2 && HELP_FLAGS.has(argv[1]!)) {
      io.stdout.write(`usage: npm run cli --silent -- <command> [--help]\n\n${family.map(([, c]) => `  ${c.usage}`).join('\n')}\n\n${EXIT_HELP}\n`);
      return EXIT.ok;
    }
    // the line that says what went wrong first, then the usage: a script's log shows which
    // word was refused, and a person sees the command list right after it
    io.stderr.write(`error: ${unknownCommand(argv)}\n\n${help()}`);
    return EXIT.usage;
  }
  const args = argv.slice(name.split(' ').length);
  // help on any command is an answer, not an error, and opens no store (before a `--`: after it,
  // `-h` is an argument, a token's name say)
  const optionsPart = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  if (optionsPart.some((a) => HELP_FLAGS.has(a))) {
    io.stdout.write(`usage: npm run cli --silent -- ${commands[name]!.usage}\n\n${EXIT_HELP}\n`);
    return EXIT.ok;
  }
  let store: StoreBackend | undefined;
  const release = holdProcessState(io.env);
  try {
    const config = loadConfig(io.env, io.cwd);
    const command = commands[name]!;
    const given = command.positional === undefined ? args : plainArguments(name, args, command.positional);
    if (command.existingStore && !io.store && !config.DATABASE_URL && !lmdbStoreExists(config.DATA_DIR)) {
      throw new StoreError(`no store at ${path.join(config.DATA_DIR, 'store')}: is DATA_DIR right? (nothing was created)`);
    }
    // with DATABASE_URL the same refusal is the PostgreSQL store's, made before it migrates
    if (!command.noStore) store = io.store ?? (await openConfiguredStore(config, undefined, undefined, undefined, { existing: command.existingStore === true }));
    const ctx = { ...io, config, exitCode: EXIT.ok as number };
    // a noStore command is never handed one
    const out = await command.run(store as StoreBackend, given, ctx);
    // JSON.stringify escapes C0 only: C1 controls and bidi overrides (a graph's tensor names in an
    // import's manifest) are escaped too, \uXXXX being the same JSON (printable.ts says why)
    io.stdout.write(out instanceof TextOutput ? out.text : `${printable(JSON.stringify(out, null, 2))}\n`);
    return ctx.exitCode;
  } catch (e) {
    const code = exitCodeOf(e);
    io.stderr.write(code === null ? `${(e as Error)?.stack ?? String(e)}\n` : `error: ${(e as Error).message}\n`);
    return code ?? EXIT.failed;
  } finally {
    try {
      if (store !== io.store) await store?.close();
    } finally {
      release();
    }
  }
}
