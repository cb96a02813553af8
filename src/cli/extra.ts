import type { Command } from './command.ts';
import { signingCommands } from './signing.ts';
import { dbCommands } from './db.ts';
import { meteringCommands } from './metering.ts';
import { modelCommands } from './models.ts';
import { opsCommands } from './ops.ts';

/** Commands contributed by later concerns (settlements, ledger, models, keys). */
export const extraCommands: Record<string, Command> = { ...signingCommands, ...meteringCommands, ...modelCommands, ...dbCommands, ...opsCommands };
