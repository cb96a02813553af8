// How an operator asks a running server to serve another model set. The engine lives in
// the server's main thread. The admin API runs in an API worker thread of the same process:
// its request reaches the main thread as a message (serveActivationRequests' `take`). The
// CLI is another process: it reaches the main thread through small files in
// DATA_DIR/model-set/, which also hold what both read back:
//   request.json  the CLI's latest activation asked for: {id, model_set, at} (written
//                 atomically by rename); the main thread hears of it through fs.watch
//   state.json    what the main thread serves and did: {active, activating, last} where
//                 `last` carries the id of the request it answers (admin API's or CLI's)
// Files, not a store record: the request must reach the main thread from another process
// (the CLI) without a new store schema, and the answer is per node, as the engine is.
//   active.json   the set the last successful activation switched to, and the MODEL_SET it
//                 replaced: {model_set, over, at}
// An activation survives a restart (startupModelSet reads active.json) while MODEL_SET stays
// what it replaced; an operator who changes MODEL_SET afterwards has said something newer,
// and that wins. request.json does not: a request left from before a start is dropped.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
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
const REQUEST_FILE = 'request.json';

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

/** A new request for `modelSet`, to hand to the main thread (the admin API posts it). */
export function newActivationRequest(modelSet: string, at = new Date()): ActivationRequest {
  if (!MODEL_SET_NAME.test(modelSet) || modelSet === '.' || modelSet === '..') throw new RangeError(`model set name must be 1 to 64 of A-Z a-z 0-9 . _ - (got ${JSON.stringify(modelSet)})`);
  return { id: randomUUID(), model_set: modelSet, at: at.toISOString() };
}

/** From another process (the CLI): leaves the request where the server's main thread hears of it. */
export function requestActivation(dataDir: string, modelSet: string, at = new Date()): ActivationRequest {
  const req = newActivationRequest(modelSet, at);
  mkdirSync(folder(dataDir), { recursive: true });
  writeAtomically(join(folder(dataDir), REQUEST_FILE), req);
  return req;
}

/** The id of the CLI's request waiting in request.json, or null when there is none: a server's
 * start removes the file (a request from before it is dropped), and nothing else does. */
export function waitingRequestId(dataDir: string): string | null {
  const req = readJsonFile<ActivationRequest>(join(folder(dataDir), REQUEST_FILE));
  return typeof req?.id === 'string' ? req.id : null;
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

/** fs.watch is the event; this re-check is only for the filesystems where it misses some
 * (network mounts, some container overlays) or where the host's inotify watches ran out. */
const REQUEST_RECHECK_MS = 5_000;

export interface ActivationRequests {
  /** a request that arrived as a message (the admin API, from an API worker) */
  take(req: ActivationRequest): void;
  stop(): void;
}

/**
 * Main thread: serves activation requests to `sw`, one at a time, and keeps state.json
 * current. Requests come as messages (`take`) and from request.json (the CLI). One that
 * arrives while another activation runs waits; a newer one replaces it, so the last word
 * wins. A request.json left from before this start is dropped (a restart serves MODEL_SET,
 * or the set active.json names).
 */
export function serveActivationRequests(
  dataDir: string,
  modelsDir: string,
  sw: ModelSetSwitch,
  log: (obj: object, msg: string) => void,
  { configured = null, recheckMs = REQUEST_RECHECK_MS }: { configured?: string | null; recheckMs?: number } = {},
): ActivationRequests {
  const dir = folder(dataDir);
  mkdirSync(dir, { recursive: true });
  const requestFile = join(dir, REQUEST_FILE);
  rmSync(requestFile, { force: true });
  // next: the request waiting for the running activation to end; answered: the one `last`
  // answers; fromFile: the last request read from request.json (never taken twice)
  let next: ActivationRequest | null = null;
  let answered: string | null = null;
  let fromFile: string | null = null;
  let running = false;
  let stopped = false;
  const writeState = () => writeAtomically(join(dir, 'state.json'), { ...sw.status(), last_request_id: answered, available: availableModelSets(modelsDir) } satisfies ModelSetState);
  // at start an unwritable DATA_DIR is an error; later a failed write (a full disk) is logged:
  // thrown from run()'s finally it would be an unhandled rejection that ends the main thread
  writeState();
  const publish = () => {
    try {
      writeState();
    } catch (e) {
      log({ err: (e as Error).message }, 'model set state (state.json) could not be written: the CLI and the admin API read the one before');
    }
  };
  const run = async () => {
    if (running || stopped || !next) return;
    const req = next;
    next = null;
    running = true;
    try {
      log({ model_set: req.model_set, request: req.id }, 'model set activation requested');
      const activation = sw.activate(String(req.model_set));
      publish(); // shows `activating`
      const r: Activation = await activation;
      answered = req.id;
      if (r.outcome === 'active' && configured !== null) {
        writeAtomically(join(dir, 'active.json'), { model_set: r.model_set, over: configured, at: r.at } satisfies PersistedActivation);
      }
      log({ model_set: r.model_set, outcome: r.outcome, reason: r.reason }, 'model set activation finished');
    } catch (e) {
      if (!(e instanceof ActivationBusyError)) log({ err: (e as Error).message }, 'model set activation failed');
    } finally {
      running = false;
      publish();
      void run();
    }
  };
  const take = (req: ActivationRequest) => {
    next = req;
    void run();
  };
  const readRequestFile = () => {
    if (stopped || !existsSync(requestFile)) return;
    const req = readJsonFile<ActivationRequest>(requestFile);
    if (!req || typeof req.id !== 'string' || req.id === fromFile) return;
    fromFile = req.id;
    take(req);
  };
  let watcher: FSWatcher | null = null;
  try {
    // the CLI renames its request into place: one event naming request.json (the platform may
    // leave the name out; then any event is looked at)
    watcher = watch(dir, (_event, name) => {
      if (name === null || name === REQUEST_FILE) readRequestFile();
    });
    watcher.on('error', (err) => {
      log({ err: err.message, recheck_ms: recheckMs }, 'model set requests: fs.watch failed; the CLI\'s requests are seen by the re-check only');
      watcher?.close();
    });
    watcher.unref();
  } catch (e) {
    log({ err: (e as Error).message, recheck_ms: recheckMs }, 'model set requests: fs.watch unavailable; the CLI\'s requests are seen by the re-check only');
  }
  const recheck = setInterval(readRequestFile, recheckMs);
  recheck.unref();
  // a request written between the removal above and the watch
  readRequestFile();
  return {
    take,
    stop: () => {
      stopped = true;
      watcher?.close();
      clearInterval(recheck);
    },
  };
}
