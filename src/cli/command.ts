import path from 'node:path';
import type { Config } from '../config/index.ts';
import type { StoreBackend } from '../store/index.ts';

/** Where a CLI run reads and writes: the process's own streams, environment and folder for
 * the binary (bin.ts), a test's strings for a run inside a test process (runCli in
 * bench/harness/server.ts). A command reaches none of them through `process`, so the same code
 * runs as a process of its own or as a call. */
export interface CliIo {
  /** what the configuration and the commands read (DATA_DIR, DATABASE_URL, INIT_CWD, SUDO_USER ...) */
  env: NodeJS.ProcessEnv;
  /** the folder relative paths are resolved from */
  cwd: string;
  /** a password for `user create`; a terminal (isTTY) lets `models import` ask its questions */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** the answer: JSON (or a TextOutput's text) */
  stdout: NodeJS.WritableStream;
  /** messages: errors, reports, next steps */
  stderr: NodeJS.WritableStream;
  /** a store already open in this process, used as it is and left open: the in-process test
   * harness's own (test/helpers/api.ts), so that the process never holds a second handle on one
   * LMDB path (one opened and closed beside the served one deadlocked test files under load).
   * The binary never sets it. */
  store?: import('../store/index.ts').StoreBackend;
}

/** What a command is handed besides its store and arguments. */
export interface CliContext extends CliIo {
  /** loaded from `env` once, before the store opens */
  readonly config: Config;
  /** the exit code of a command that ran to its end: a command that reports a failed outcome
   * (a model check, a refused activation, a ledger that does not verify) sets EXIT.failed and
   * still returns its answer */
  exitCode: number;
}

/** One CLI command: its usage line and what it does. Beside the errors, not in main.ts, so
 * the command modules main.ts imports do not import main.ts back (a folder cycle). */
export type Command = {
  usage: string;
  /** the command works on DATA_DIR's files itself: the CLI opens no store for it (restore) */
  noStore?: true;
  /** the command reads a store that must already exist: on a DATA_DIR without one, or with
   * DATABASE_URL a database without the service's schema, it is refused (exit 5) instead of
   * opening, and so creating, an empty store (a backup of a mistyped DATA_DIR was an empty
   * backup, exit 0; a mistyped database name got the schema and `user list` answered []) */
  existingStore?: true;
  /** the command takes at most this many plain arguments and no option: more, or an option
   * (`--dry-run`), is a usage error (exit 2) before anything runs, where it was dropped without
   * a word (`keys rotate --dry-run` rotated the key). `--` ends the options: what follows is an
   * argument however it looks (a token named `-h`). Unset: the command parses its own. */
  positional?: number;
  run(store: StoreBackend, args: string[], ctx: CliContext): Promise<unknown>;
};

/** What a command prints as it is instead of as JSON: a shell command meant for `| sh`
 * (`capture --curl`). Every other answer stays JSON on stdout. */
export class TextOutput {
  constructor(readonly text: string) {}
}

/** A file or folder named on the command line, as the operator typed it: `npm run` starts the
 * CLI in the package folder and says where the operator was in INIT_CWD (a path typed in
 * docs/ resolved from the package folder looked for another file). The configuration's own
 * paths (DATA_DIR, MODELS_DIR) are resolved from the package folder, as the service's are. */
export function operatorPath(io: Pick<CliIo, 'env' | 'cwd'>, file: string): string {
  return path.resolve(io.env.INIT_CWD ?? io.cwd, file);
}
