import path from 'node:path';
import { checkModelSet } from '../inference/index.ts';
import { UsageError } from './errors.ts';
import type { Command } from './main.ts';

export const modelCommands: Record<string, Command> = {
  'models check': {
    usage: 'models check <model_set_dir>   (validates the manifest and runs every graph once)',
    async run(_store, [dir]) {
      if (!dir) throw new UsageError('model set folder required');
      const result = await checkModelSet(path.resolve(dir));
      if (!result.ok) process.exitCode = 1;
      process.stderr.write(`${result.report}\n`);
      return { ok: result.ok };
    },
  },
};
