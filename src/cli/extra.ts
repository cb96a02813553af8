import type { Command } from './main.ts';

/** Commands contributed by later concerns (settlements, ledger, models, keys). */
export const extraCommands: Record<string, Command> = {};
