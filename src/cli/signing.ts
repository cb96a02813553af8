import os from 'node:os';
import { parseArgs } from 'node:util';
import type { CliContext, Command } from './command.ts';
import { now } from '../clock.ts';
import { isNameText, NAME_TEXT_RULE } from '../packets/index.ts';
import { KID_PATTERN, keysDir, publicJwksOf, UnknownSigningKeyError, keySourceFor } from '../signing/index.ts';
import { NotFoundError, UsageError } from './errors.ts';

// Keys live beside the store: DATA_DIR/keys files with LMDB, the shared database with
// PostgreSQL (every node picks a rotation up within SHARED_KEY_CACHE_MS).
const keys = (store: Parameters<Command['run']>[0], ctx: CliContext) => keySourceFor(store, ctx.config.DATA_DIR);

/** A keys folder the operator cannot read or write (its owner, a damaged `current`) is one line
 * naming it (exit 2), not a stack. */
async function onKeys<T>(ctx: CliContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) throw new UsageError(`the signing keys in ${keysDir(ctx.config.DATA_DIR)} cannot be used: ${(e as Error).message}`);
    throw e;
  }
}

/** Who ran the command, for the revocation record: the login behind sudo when there is one
 * (`sudo -u liveness npm run cli ...` would otherwise record only the service user). */
function operator(env: NodeJS.ProcessEnv): string {
  const sudo = env.SUDO_USER;
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    // no passwd entry (a container's arbitrary uid)
    user = `uid ${process.getuid?.() ?? '?'}`;
  }
  return sudo && sudo !== user ? `${sudo} (as ${user})` : user;
}

/** A thumbprint starts with '-' one time in 64 (`keys list` prints such kids): parseArgs would
 * read it as an unknown option, so a kid-shaped word that is not --by's value goes after `--`. */
function kidsAsPositionals(args: string[]): string[] {
  const options: string[] = [];
  const kids: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') return [...options, ...args.slice(i), ...kids];
    if (a === '--by') {
      options.push(a, ...args.slice(i + 1, i + 2));
      i++;
    } else if (a.startsWith('-') && KID_PATTERN.test(a)) kids.push(a);
    else options.push(a);
  }
  return kids.length > 0 ? [...options, '--', ...kids] : options;
}

export const signingCommands: Record<string, Command> = {
  'keys rotate': {
    positional: 0,
    usage: 'keys rotate   (new verdict signing key; the old public key stays in the JWKS for 7 days)',
    run: async (store, _args, ctx) => onKeys(ctx, () => keys(store, ctx).rotate(now())),
  },
  'keys revoke': {
    usage: 'keys revoke <kid> [--by NAME]   (emergency: the key leaves the JWKS at once; a new key signs when it was current)',
    async run(store, args, ctx) {
      const { positionals, values } = parseArgs({ args: kidsAsPositionals(args), allowPositionals: true, options: { by: { type: 'string' } } });
      const [kid, ...rest] = positionals;
      if (!kid || rest.length > 0) throw new UsageError('keys revoke takes one kid (keys list shows them)');
      if (values.by !== undefined && (values.by === '' || !isNameText(values.by) || [...values.by].length > 200)) throw new UsageError(`--by must be 1 to 200 characters of ${NAME_TEXT_RULE}`);
      try {
        return await onKeys(ctx, () => keys(store, ctx).revoke(kid, values.by ?? operator(ctx.env), now()));
      } catch (e) {
        if (e instanceof UnknownSigningKeyError) throw new NotFoundError(e.message);
        throw e;
      }
    },
  },
  'keys list': {
    positional: 0,
    existingStore: true,
    usage: 'keys list   (verdict signing keys: kid, created_at, retired_at, revoked_at, revoked_by, published)',
    async run(store, _args, ctx) {
      const source = keys(store, ctx);
      const current = (await onKeys(ctx, () => source.current(now()))).kid;
      const all = await onKeys(ctx, () => source.list());
      const published = new Set(publicJwksOf(all, now()).keys.map((k) => k.kid));
      return {
        keys: all.map((k) => ({
          kid: k.kid,
          created_at: k.created_at,
          retired_at: k.retired_at,
          ...(k.revoked_at ? { revoked_at: k.revoked_at, revoked_by: k.revoked_by ?? null } : {}),
          current: k.kid === current,
          published: published.has(k.kid),
        })),
      };
    },
  },
};
