// How an operator asks a running server to serve another model set. The engine lives in
// the server's main thread; the admin API (in API worker threads) and the CLI (another
// process) reach it through two small files in DATA_DIR/model-set/:
//   request.json  the latest activation asked for: {id, model_set, at} (written atomically
//                 by rename, by the admin API or the CLI)
//   state.json    what the main thread serves and did: {active, activating, last} where
//                 `last` carries the id of the request it answers
// Files, not a store record: the request must reach the main thread from another process
// (the CLI) without a new store schema, and the answer is per node, as the engine is.
//   active.json   the set the last successful activation switched to, and the MODEL_SET it
//                 replaced: {model_set, over, at}
// The main thread looks at request.json twice a second. An activation survives a restart
// (startupModelSet reads active.json) while MODEL_SET stays what it replaced; an operator who
// changes MODEL_SET afterwards has said something newer, and that wins.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ActivationBusyError, type Activation, type ModelSetStatus, type ModelSetSwitch } from './model-sets.ts';

export interface ActivationRequest {
  id: string;
  model_set: string;
  at: string;
}

export interface ModelSetState extends ModelSetStatus {
  /** the request `last` answers, null before any */
  last_request_id: string | null;
  /** sets found in MODELS_DIR (folders holding manifest.json) */
  available: string[];
}

const folder = (dataDir: string) => join(dataDir, 'model-set');

function writeAtomically(file: string, value: unknown): void {
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, file);
}

function readJsonFile<T>(file: string): T | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return null;
  }
}

export const MODEL_SET_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export function requestActivation(dataDir: string, modelSet: string, at = new Date()): ActivationRequest {
  if (!MODEL_SET_NAME.test(modelSet) || modelSet === '.' || modelSet === '..') throw new RangeError(`model set name must be 1 to 64 of A-Z a-z 0-9 . _ - (got ${JSON.stringify(modelSet)})`);
  mkdirSync(folder(dataDir), { recursive: true });
  const req = { id: randomUUID(), model_set: modelSet, at: at.toISOString() };
  writeAtomically(join(folder(dataDir), 'request.json'), req);
  return req;
}

export function readModelSetState(dataDir: string): ModelSetState | null {
  return readJsonFile<ModelSetState>(join(folder(dataDir), 'state.json'));
}

export interface PersistedActivation {
  model_set: string;
  /** MODEL_SET when the activation happened */
  over: string;
  at: string;
}

/** Main thread, at start: the set to serve (MODEL_SET, or the set a later activation
 * switched to while MODEL_SET is unchanged since) and why, for the start-up log. */
export function startupModelSet(dataDir: string, modelsDir: string, configured: string): { model_set: string; note: string | null } {
  const file = join(folder(dataDir), 'active.json');
  const saved = readJsonFile<PersistedActivation>(file);
  if (!saved || typeof saved.model_set !== 'string' || saved.model_set === configured) return { model_set: configured, note: null };
  if (saved.over !== configured) {
    rmSync(file, { force: true });
    return { model_set: configured, note: `MODEL_SET changed to ${configured} since model set ${saved.model_set} was activated (over ${saved.over}) at ${saved.at}: serving MODEL_SET` };
  }
  if (!availableModelSets(modelsDir).includes(saved.model_set)) {
    return { model_set: configured, note: `model set ${saved.model_set}, activated at ${saved.at}, is no longer in MODELS_DIR: serving MODEL_SET ${configured}` };
  }
  return { model_set: saved.model_set, note: `serving model set ${saved.model_set}, activated at ${saved.at} over MODEL_SET=${configured} (set MODEL_SET=${saved.model_set} to say so in the configuration, or activate ${configured} to go back)` };
}

export function availableModelSets(modelsDir: string): string[] {
  try {
    return readdirSync(modelsDir).filter((d) => MODEL_SET_NAME.test(d) && existsSync(join(modelsDir, d, 'manifest.json'))).sort();
  } catch {
    return [];
  }
}

/**
 * Main thread: serves activation requests to `sw` and keeps state.json current. A request
 * left from before this start is dropped (a restart serves MODEL_SET). Returns a stop function.
 */
export function watchActivationRequests(
  dataDir: string,
  modelsDir: string,
  sw: ModelSetSwitch,
  log: (obj: object, msg: string) => void,
  intervalMs = 500,
  configured: string | null = null,
): () => void {
  const dir = folder(dataDir);
  mkdirSync(dir, { recursive: true });
  const requestFile = join(dir, 'request.json');
  rmSync(requestFile, { force: true });
  // seen: the request taken up (never taken twice); answered: the one `last` answers
  let seen: string | null = null;
  let answered: string | null = null;
  let busy = false;
  const publish = () => writeAtomically(join(dir, 'state.json'), { ...sw.status(), last_request_id: answered, available: availableModelSets(modelsDir) } satisfies ModelSetState);
  publish();
  const tick = async () => {
    if (busy) return;
    if (!existsSync(requestFile)) return;
    const req = readJsonFile<ActivationRequest>(requestFile);
    if (!req || typeof req.id !== 'string' || req.id === seen) return;
    busy = true;
    seen = req.id;
    try {
      log({ model_set: req.model_set, request: req.id }, 'model set activation requested');
      const run = sw.activate(String(req.model_set));
      publish(); // shows `activating`
      const r: Activation = await run;
      answered = req.id;
      if (r.outcome === 'active' && configured !== null) {
        writeAtomically(join(dir, 'active.json'), { model_set: r.model_set, over: configured, at: r.at } satisfies PersistedActivation);
      }
      log({ model_set: r.model_set, outcome: r.outcome, reason: r.reason }, 'model set activation finished');
    } catch (e) {
      if (!(e instanceof ActivationBusyError)) log({ err: (e as Error).message }, 'model set activation failed');
    } finally {
      busy = false;
      publish();
    }
  };
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
