import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/index.ts';
import { checkModelSet } from '../inference/index.ts';
import { calibrate, CalibrationError, summary } from '../inference/calibration/index.ts';
import { ManifestError } from '../inference/manifest.ts';
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
  'models calibrate': {
    usage: 'models calibrate <model_set> --live <dir> --attack <dir> [--out <dir>]   (APCER/BPCER/ACER, EER, DET plot; default out DATA_DIR/calibration/<model_set>)',
    async run(_store, args) {
      const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { live: { type: 'string' }, attack: { type: 'string' }, out: { type: 'string' } } });
      const set = positionals[0];
      if (!set) throw new UsageError('model set (a name in MODELS_DIR or a folder) required');
      if (!values.live || !values.attack) throw new UsageError('--live <dir> and --attack <dir> are both required');
      const config = loadConfig();
      try {
        const report = await calibrate({
          set,
          modelsDir: config.MODELS_DIR,
          liveDir: path.resolve(values.live),
          attackDir: path.resolve(values.attack),
          outDir: path.resolve(values.out ?? path.join(config.DATA_DIR, 'calibration', path.basename(set))),
          backend: config.INFERENCE_BACKEND,
          threads: config.INFERENCE_THREADS,
        });
        process.stderr.write(`${summary(report)}\n`);
        const { scores: _scores, ...figures } = report;
        return figures;
      } catch (e) {
        if (e instanceof CalibrationError || e instanceof ManifestError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
};
