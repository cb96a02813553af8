import { ConfigError } from '../config/index.ts';
import { StoreError, StoreUnavailableError } from '../store/index.ts';

/** A command used wrongly: one line on stderr, no stack, exit EXIT.usage. The classes below it
 * say what kind of refusal it is, so scripts can tell "no such token" from a typo.
 * In a file of its own so that command modules can throw them without importing main.ts. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** The token, user, key, model set or record named does not exist: exit EXIT.not_found. */
export class NotFoundError extends UsageError {
  override name = 'NotFoundError';
}

/** The change conflicts with what is there (a name taken, a revoked token): exit EXIT.conflict. */
export class ConflictError extends UsageError {
  override name = 'ConflictError';
}

/** The CLI's exit codes (docs/cli.md). 1 is a command that ran and reports a failed
 * outcome (a model check, a refused activation, a ledger that does not verify) or an
 * unexpected error. */
export const EXIT = { ok: 0, failed: 1, usage: 2, not_found: 3, conflict: 4, store_unavailable: 5 } as const;

/** The exit code of a refusal the CLI reports in one line (its message on stderr), or null for
 * an unexpected error, which runCommand (main.ts) reports with its stack and exit 1. A store that cannot be opened, or that
 * stops answering mid-command (PostgreSQL gone), is 5: a retry may succeed. */
export function exitCodeOf(e: unknown): number | null {
  if (e instanceof NotFoundError) return EXIT.not_found;
  if (e instanceof ConflictError) return EXIT.conflict;
  if (e instanceof StoreError || e instanceof StoreUnavailableError) return EXIT.store_unavailable;
  if (e instanceof UsageError || e instanceof ConfigError || /^ERR_PARSE_ARGS_/.test(String((e as { code?: string } | null | undefined)?.code))) return EXIT.usage;
  return null;
}
