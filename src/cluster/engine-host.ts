import { ConfigError, type Config } from '../config/index.ts';
import { availableModelSets, createModelSetSwitch, ManifestError, serveActivationRequests, startupModelSet, type ActivationRequest, type EngineOptions, type ModelSetSwitch, type PoolTimes, type InferenceJob, type InferenceService, type InferenceTiming, type ReadinessListener, type ResultRecord } from '../inference/index.ts';
import type { ModuleId } from '../contract/index.ts';
import type { Logger } from '../observability/index.ts';

export interface EngineHost extends InferenceService {
  close(): Promise<void>;
  ping(): Promise<void>;
  poolTimes(): PoolTimes | null;
  poolMetrics(): unknown[][];
  /** `listener` hears the serving set's readiness each time it changes */
  onReadinessChange(listener: ReadinessListener): () => void;
  /** an activation the admin API asked for (its API worker posted it) */
  requestActivation(req: ActivationRequest): void;
}

/** Starts the process's one inference engine (warm-up runs in the background; readiness
 * reports it) and applies the testing-only fault settings around it. */
export function startEngine(config: Config, log: Logger, moduleEnabled?: (id: ModuleId) => Promise<boolean>): EngineHost {
  // a switch over model sets: the admin API and the CLI can activate another set live, and
  // such an activation outlives a restart (startupModelSet says when and why)
  const start = startupModelSet(config.DATA_DIR, config.MODELS_DIR, config.MODEL_SET);
  if (start.note) log.warn({ model_set: start.model_set, configured: config.MODEL_SET }, start.note);
  const opts: EngineOptions = {
    modelsDir: config.MODELS_DIR,
    modelSet: start.model_set,
    backend: config.INFERENCE_BACKEND,
    threads: config.INFERENCE_THREADS,
    warmupRuns: config.WARMUP_RUNS,
    requireTrained: config.REQUIRE_TRAINED_MODELS,
    log: (obj, msg) => log.info(obj, msg),
  };
  // an activation may drop only modules the operator has enabled; load and warm-up are bounded
  const switchOpts = { moduleEnabled, loadTimeoutMs: config.MODEL_LOAD_TIMEOUT_SECONDS * 1000 };
  // a mistyped MODEL_SET is a configuration error: one line, not a stack trace
  const configured = (): ModelSetSwitch => {
    try {
      return createModelSetSwitch({ ...opts, modelSet: config.MODEL_SET }, switchOpts);
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      const sets = availableModelSets(config.MODELS_DIR);
      throw new ConfigError(`MODEL_SET ${config.MODEL_SET}: ${e.message} (model sets in ${config.MODELS_DIR}: ${sets.join(', ') || 'none'})`);
    }
  };
  let engine: ModelSetSwitch;
  if (start.model_set === config.MODEL_SET) engine = configured();
  else {
    try {
      engine = createModelSetSwitch(opts, switchOpts);
    } catch (e) {
      if (!(e instanceof ManifestError)) throw e;
      // an activated set that no longer loads gives way to the configured one
      log.error({ model_set: start.model_set, err: { message: e.message } }, `the activated model set does not load: serving MODEL_SET ${config.MODEL_SET}`);
      engine = configured();
    }
  }
  // The shipped sets have random weights: say so where an operator first looks.
  const untrained = engine.readiness().filter((m) => !m.trained);
  if (untrained.length > 0) {
    log.warn(
      { model_set: start.model_set, modules: untrained.map((m) => m.module_id), require_trained: config.REQUIRE_TRAINED_MODELS },
      config.REQUIRE_TRAINED_MODELS
        ? 'model set is untrained (trained: false): its modules stay unready because REQUIRE_TRAINED_MODELS is set'
        : 'model set is untrained (trained: false): its verdicts mean nothing; deploy trained graphs (README "Deploying a trained model") and set REQUIRE_TRAINED_MODELS=1 in production',
    );
  }
  let closing = false;
  const requests = serveActivationRequests(config.DATA_DIR, config.MODELS_DIR, engine, (obj, msg) => log.info(obj, msg), { configured: config.MODEL_SET });
  // An activated set whose manifest loads but none of whose modules can serve once started (a
  // graph truncated or removed since it was activated) gives way to the configured one too, as
  // one whose manifest no longer loads does above: it was served unready until an operator
  // activated another set by hand.
  const fallBack = async (): Promise<void> => {
    if (closing || start.model_set === config.MODEL_SET) return;
    const modules = engine.readiness();
    if (modules.length === 0 || modules.some((m) => m.ready || m.error === null)) return;
    log.error({ model_set: start.model_set, errors: modules.map((m) => `${m.module_id}: ${m.error}`) }, `the activated model set does not serve: serving MODEL_SET ${config.MODEL_SET}`);
    const r = await engine.activate(config.MODEL_SET);
    if (r.outcome !== 'active' && !closing) log.error({ model_set: config.MODEL_SET, outcome: r.outcome, reason: r.reason }, 'MODEL_SET could not be served either');
  };
  // a stop during warm-up rejects start(); only a failure while serving is an error
  engine.start()
    .catch((err: Error) => {
      if (!closing) log.error({ err }, 'inference engine failed to start');
    })
    .then(fallBack)
    .catch((err: unknown) => {
      if (!closing) log.error({ err }, 'falling back to MODEL_SET failed');
    });
  const delay = config.TEST_INFERENCE_DELAY_MS;
  const failPrefix = config.TEST_INFERENCE_FAIL_PREFIX;
  return {
    readiness: () => engine.readiness(),
    onReadinessChange: (listener) => engine.onReadinessChange(listener),
    requestActivation: (req) => requests.take(req),
    poolTimes: () => engine.poolTimes(),
    poolMetrics: () => engine.poolMetrics(),
    ping: () => engine.ping(),
    async infer(job: InferenceJob, timing?: InferenceTiming): Promise<ResultRecord[]> {
      const delayPrefix = config.TEST_INFERENCE_DELAY_PREFIX;
      if (delay > 0 && (!delayPrefix || job.captures.some((c) => c.packet.capture_id.startsWith(delayPrefix)))) await new Promise((r) => setTimeout(r, delay));
      if (failPrefix && job.captures.some((c) => c.packet.capture_id.startsWith(failPrefix))) {
        throw new Error('injected inference failure (TEST_INFERENCE_FAIL_PREFIX)');
      }
      return engine.infer(job, timing);
    },
    close: () => {
      closing = true;
      requests.stop();
      return engine.close();
    },
  };
}
