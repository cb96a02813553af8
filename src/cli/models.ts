import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { parseArgs } from 'node:util';
import { MODULE_IDS, type ModuleId } from '../contract/index.ts';
import {
  availableModelSets,
  calibrate,
  CalibrationError,
  calibrationSummary,
  checkModelSet,
  ImportError,
  ImportExistsError,
  loadManifest,
  openQuestions,
  planImport,
  readGraphFacts,
  readGraphFile,
  writeImport,
  type ImportAnswers,
  ManifestError,
  readModelSetState,
  requestActivation,
  waitingRequestId,
} from '../inference/index.ts';
import { ConflictError, EXIT, NotFoundError, UsageError } from './errors.ts';
import { operatorPath, type Command } from './command.ts';
import { runningServer } from '../lifecycle.ts';

export const modelCommands: Record<string, Command> = {
  'models check': {
    usage: 'models check <model_set_dir>   (validates the manifest and runs every graph once)',
    async run(_store, [dir], ctx) {
      if (!dir) throw new UsageError('model set folder required');
      const folder = operatorPath(ctx, dir);
      // a folder that is not there is a name that does not exist (exit 3, as activate's), not a
      // set that failed its checks (exit 1)
      if (!fs.existsSync(folder)) throw new NotFoundError(`no model set folder at ${folder}`);
      const result = await checkModelSet(folder);
      if (!result.ok) ctx.exitCode = EXIT.failed;
      ctx.stderr.write(`${result.report}\n`);
      return { ok: result.ok };
    },
  },
  'models import': {
    usage:
      'models import <file.onnx> [--name SET] [--crop-fraction F] [--size PX] [--resize area|bilinear] [--channel-order RGB|BGR] [--scale S] [--mean M,M,M] [--std S,S,S] [--output-kind logit|probability] [--live-index I] [--threshold T] [--untrained] [--force]   (an rgb_liveness frame graph becomes a model set in MODELS_DIR; asks at a terminal for what the graph cannot tell; --force replaces an existing model set, nothing else)',
    async run(store, args, ctx) {
      const opt = (type: 'string' | 'boolean') => ({ type });
      const { positionals, values } = parseArgs({
        args,
        allowPositionals: true,
        options: {
          name: opt('string'), 'crop-fraction': opt('string'), size: opt('string'), resize: opt('string'), 'channel-order': opt('string'),
          scale: opt('string'), mean: opt('string'), std: opt('string'), 'output-kind': opt('string'), 'live-index': opt('string'),
          threshold: opt('string'), untrained: opt('boolean'), force: opt('boolean'),
        },
      });
      const file = positionals[0];
      if (!file) throw new UsageError('an .onnx file is required');
      const { config, stderr } = ctx;
      const graphFile = operatorPath(ctx, file);
      const v = values as Record<string, string | boolean | undefined>;
      const str = (k: string) => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
      const answers: ImportAnswers = {
        name: str('name'), crop_fraction: str('crop-fraction'), size: str('size'), resize: str('resize'), channel_order: str('channel-order'),
        scale: str('scale'), mean: str('mean'), std: str('std'), output_kind: str('output-kind'), live_index: str('live-index'),
        threshold: str('threshold'), untrained: v.untrained === true,
      };
      try {
        const facts = await readGraphFacts(readGraphFile(graphFile));
        stderr.write(
          `read from the graph: input "${facts.input}" ${facts.dtype} ${facts.layout}, size ${facts.size ?? 'open'}, batch ${facts.batch}; ` +
            `output "${facts.output}" with ${facts.width} value(s) per item${facts.width >= 2 ? (facts.rowsSumToOne ? ' (rows sum to 1: softmax)' : ' (rows do not sum to 1: logits)') : ''}\n`,
        );
        // A person at a terminal is asked; a script must pass flags (planImport names the missing ones).
        const open = openQuestions(facts, answers);
        if (open.length > 0 && ctx.stdin.isTTY) {
          const rl = createInterface({ input: ctx.stdin, output: stderr });
          try {
            for (const q of open) answers[q.key] = (await rl.question(`${q.prompt} [${q.flag}]: `)).trim() as never;
          } finally {
            rl.close();
          }
        }
        const plan = planImport(config.MODELS_DIR, file, facts, answers);
        try {
          writeImport(plan, graphFile, v.force === true);
        } catch (e) {
          throw importWriteError(e, config.MODELS_DIR);
        }
        const check = await checkModelSet(plan.dir);
        stderr.write(`${check.report}\n`);
        if (!check.ok) ctx.exitCode = EXIT.failed;
        // An imported set describes rgb_liveness only: a module it lacks that is enabled would
        // turn unready, so a running server refuses the switch until it is disabled (model-sets.ts)
        const lacking: ModuleId[] = [];
        for (const id of MODULE_IDS) {
          if (!(id in (plan.manifest.modules as Record<string, unknown>)) && (await store.moduleEnabled(id).catch(() => true))) lacking.push(id);
        }
        const next = check.ok
          ? [
              `npm run cli -- models calibrate ${plan.model_set} --live <folder of live crops> --attack <folder of attack crops>   (sets the threshold from your own captures; models/README.md "Picking a threshold")`,
              ...lacking.map((id) => `npm run cli -- module disable ${id}   (${plan.model_set} has no ${id}: a server refuses to switch while it is enabled; its calls then answer 403 module_disabled)`),
              `npm run cli -- models activate ${plan.model_set} --wait 300   (a running server switches to it, and serves it again after a restart; or start with MODEL_SET=${plan.model_set})`,
            ]
          : [`fix ${path.join(plan.dir, 'manifest.json')} (the check above names the field), then npm run cli -- models check ${plan.dir}`];
        stderr.write(`next:\n${next.map((n) => `  ${n}`).join('\n')}\n`);
        return { model_set: plan.model_set, dir: plan.dir, check: check.ok ? 'ok' : 'failed', manifest: plan.manifest, next };
      } catch (e) {
        if (e instanceof ImportExistsError) throw new ConflictError(e.message);
        if (e instanceof ImportError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
  'models calibrate': {
    usage: 'models calibrate <model_set> --live <dir> --attack <dir> [--out <dir>]   (APCER/BPCER/ACER, EER, DET plot; default out DATA_DIR/calibration/<model_set>)',
    async run(_store, args, ctx) {
      const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { live: { type: 'string' }, attack: { type: 'string' }, out: { type: 'string' } } });
      const set = positionals[0];
      if (!set) throw new UsageError('model set (a name in MODELS_DIR or a folder) required');
      if (!values.live || !values.attack) throw new UsageError('--live <dir> and --attack <dir> are both required');
      const { config } = ctx;
      const resolve = (p: string) => operatorPath(ctx, p);
      try {
        // a folder given relative to where the command runs, else a name in MODELS_DIR
        const setFolder = resolve(set);
        const report = await calibrate({
          set: fs.existsSync(path.join(setFolder, 'manifest.json')) ? setFolder : set,
          modelsDir: config.MODELS_DIR,
          liveDir: resolve(values.live),
          attackDir: resolve(values.attack),
          outDir: resolve(values.out ?? path.join(config.DATA_DIR, 'calibration', path.basename(set))),
          backend: config.INFERENCE_BACKEND,
          threads: config.INFERENCE_THREADS,
        });
        ctx.stderr.write(`${calibrationSummary(report)}\n`);
        const { scores: _scores, ...figures } = report;
        return figures;
      } catch (e) {
        // a set that is not there is not found (3), as for models activate
        if (e instanceof ManifestError && !fs.existsSync(path.join(config.MODELS_DIR, set)) && !fs.existsSync(path.join(resolve(set), 'manifest.json'))) throw new NotFoundError(e.message);
        if (e instanceof CalibrationError || e instanceof ManifestError) throw new UsageError(e.message);
        throw e;
      }
    },
  },
  'models status': {
    positional: 0,
    // the state files and the manifests: no store is opened (it made one in a mistyped DATA_DIR)
    noStore: true,
    usage: 'models status   (the model set a running server on this DATA_DIR serves, its last activation, and which sets are trained)',
    async run(_store, _args, { config }) {
      const state = readModelSetState(config.DATA_DIR) ?? { active: null, note: 'no running server has written its state in this DATA_DIR', available: availableModelSets(config.MODELS_DIR) };
      // the manifest's own word on its weights: false means verdicts that mean nothing
      const trained: Record<string, boolean | null> = {};
      for (const set of state.available) {
        try {
          trained[set] = loadManifest(path.join(config.MODELS_DIR, set)).trained;
        } catch {
          trained[set] = null; // a manifest that does not load: `models check` says why
        }
      }
      // the state file outlives the server that wrote it: said, so a stopped server's set is not
      // read as one being served
      // a restore holds the same mark while it runs; it serves nothing
      const holder = runningServer(config.DATA_DIR);
      const running = holder !== null && holder.role !== 'restore';
      const stale = state.active !== null && !running
        ? { note: 'no server is running on this DATA_DIR: active is the set the last one served (a start serves it again while MODEL_SET is unchanged)' }
        : {};
      return { ...state, running, ...stale, trained };
    },
  },
  'models activate': {
    usage: 'models activate <model_set> [--wait SECONDS]   (a running server loads, checks and warms it beside the old set, then switches; a restart serves it again while MODEL_SET is unchanged)',
    async run(_store, args, ctx) {
      const { positionals, values } = parseArgs({ args, allowPositionals: true, options: { wait: { type: 'string' } } });
      const set = positionals[0];
      if (!set) throw new UsageError('model set name required');
      const { config } = ctx;
      if (!availableModelSets(config.MODELS_DIR).includes(set)) throw new NotFoundError(`unknown model set ${set}: no ${set}/manifest.json in ${config.MODELS_DIR}`);
      const wait = values.wait === undefined ? 0 : Number(values.wait);
      if (!Number.isInteger(wait) || wait < 0 || wait > 86_400) throw new UsageError('--wait must be a whole number of seconds (0 to 86400)');
      const req = requestActivation(config.DATA_DIR, set);
      if (wait === 0) return { request_id: req.id, model_set: set, requested_at: req.at };
      // the server hears of the request through fs.watch and answers in state.json; read
      // that, within the bound given
      const end = Date.now() + wait * 1000;
      while (Date.now() < end) {
        const state = readModelSetState(config.DATA_DIR);
        if (state?.last_request_id === req.id && state.last) {
          if (state.last.outcome === 'refused') ctx.exitCode = EXIT.failed;
          return { request_id: req.id, ...state.last, active: state.active };
        }
        // a server that started after the request was written removed it, unanswered (a start
        // drops a request from before it): it will never be answered, so say so now rather than
        // wait out the bound and call it pending (read after the state, so that an answer
        // written meanwhile is seen first on the next turn)
        if (waitingRequestId(config.DATA_DIR) === null) {
          const now = readModelSetState(config.DATA_DIR);
          if (now?.last_request_id !== req.id) {
            // a failed outcome, as a refusal is (exit 1), with what is served instead
            ctx.exitCode = EXIT.failed;
            return { request_id: req.id, outcome: 'dropped', model_set: set, reason: `a server started on ${config.DATA_DIR} after this request was made and dropped it unanswered (a start serves MODEL_SET, or the set last activated): ask again`, active: now?.active ?? null };
          }
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new UsageError(`no answer from a server within ${wait} s (is one running on ${config.DATA_DIR}?); request ${req.id} stays pending`);
    },
  },
};

/** A MODELS_DIR this user cannot write (deploy/README.md: root owns /opt/liveness) is one line
 * that says what to do, a usage error (exit 2), not a stack trace; anything else as it is. */
export function importWriteError(e: unknown, modelsDir: string): unknown {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') return e;
  return new UsageError(`cannot write the model set into ${modelsDir} (${code}): run the import as a user who can, or set MODELS_DIR to a folder this user can write (and the service's MODELS_DIR with it)`);
}
