import type { Command } from './main.ts';
import { signingCommands } from '../signing/cli.ts';

/** Commands contributed by later concerns (settlements, ledger, models, keys). */
export const extraCommands: Record<string, Command> = { ...signingCommands };
