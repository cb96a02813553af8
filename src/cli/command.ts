import type { StoreBackend } from '../store/backend.ts';

/** One CLI command: its usage line and what it does. Beside the errors, not in main.ts, so
 * the command modules main.ts imports do not import main.ts back (a folder cycle). */
export type Command = { usage: string; run(store: StoreBackend, args: string[]): Promise<unknown> };
