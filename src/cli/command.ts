import type { StoreBackend } from '../store/index.ts';

/** One CLI command: its usage line and what it does. Beside the errors, not in main.ts, so
 * the command modules main.ts imports do not import main.ts back (a folder cycle). */
export type Command = {
  usage: string;
  /** the command works on DATA_DIR's files itself: the CLI opens no store for it (restore) */
  noStore?: true;
  run(store: StoreBackend, args: string[]): Promise<unknown>;
};

/** What a command prints as it is instead of as JSON: a shell command meant for `| sh`
 * (`capture --curl`). Every other answer stays JSON on stdout. */
export class TextOutput {
  constructor(readonly text: string) {}
}
