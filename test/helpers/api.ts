// The service's HTTP API in process: the real app of an API worker, composed by the very
// function src/worker.ts serves with (src/http/compose.ts composeApiWorker: buildRouter over
// the real Services, createApp with CORS, the connection cap, HSTS and the fault hook), over
// the real store opened as the service opens it (openConfiguredStore: LMDB in a temporary
// DATA_DIR, or PostgreSQL at a DATABASE_URL the test gives), after the real start-up steps
// (bootstrapAdmin, startupHooks: signing key, recovery, idempotency pruning), listening with
// uWebSockets.js on a loopback port INSIDE the test process. A test talks to it over real HTTP
// exactly as to a started server, without the ~1-4.5 s of CPU a child process costs (a
// TypeScript or bundle start, two API worker threads, the inference pool).
//
// What differs from `npm start`, and why it does not matter to the rules tested here:
// - one API worker, and no main thread: inference takes the path an API worker's call takes
//   (src/cluster/remote-inference.ts RemoteInference over a message channel to
//   src/cluster/relay.ts relayInference and the engine, pixel buffers transferred, an engine's
//   failure answered as inference_failed), the model-set hand-off goes straight to the
//   engine's request queue, and /metrics aggregates this worker with the process-wide
//   registries the way src/cluster/cluster.ts does. Tests whose subject is
//   the process or the transport across workers (TLS, several workers balancing, connection
//   caps across workers, slow clients, start-up, signals, worker death) stay server tests.
// - the engine: `engine: 'real'` starts the service's own (src/cluster/engine-host.ts
//   startEngine, the pool included); the default, 'none', serves no model at all (every module
//   not ready, so a verify call answers module_unavailable): for files whose subject is not
//   inference. There is no fake engine with results of its own here.
//   Its pool threads (and `auto`'s measurement threads) run their compiled bundles when dist/
//   matches the sources, the rule by which tests start servers from the build
//   (bench/harness/from-build.ts, src/source-ext.ts startEngineThreadsFromBuild): ~0.5-1 CPU-s
//   less per engine start than tsx compiling the sources again in each thread (issue 43).
// - settings the service reads from its process environment at module load
//   (TEST_PASSWORD_SCRYPT_N, TEST_CLOCK_SKEW_MS) or at composition (TEST_WORKER_FAULTS, tracing)
//   are put into this process's environment before the service's modules load, and restored
//   at stop(); CLOCK_FILE goes to the clock (setClockFile). Several harnesses may run at once
//   in one file (each with its own configuration, read from the process's starting environment
//   and its own settings), but those process-wide settings are shared: startApi() refuses a
//   scrypt N it cannot apply.
// - LMDB: two handles on the store, as in the service. The start-up steps, the jobs and the
//   CLI use the main thread's (`mainStore`), which starts the process's metering writer thread
//   (src/store/lmdb/writer.ts); the app serves from an API worker's (`store`), given its own
//   channel to that writer, so its reservations, settlements, refunds and audit lines travel
//   to the writer thread and commit there, as an API worker's do (`meteringWriter: false`: the
//   app commits on this thread instead, as a thread without a writer does). Read the store
//   through `store`/`lmdb` rather than another handle opened in this process on the same
//   DATA_DIR: one opened and closed around each read while the app committed was seen to stall.
// - logs are kept in `logs` (the test process's stdout is its TAP stream).
import { Writable } from 'node:stream';
import { MessageChannel } from 'node:worker_threads';
import path from 'node:path';
import { jsonLines, runCli, tempDir, waitReady, type CliResult } from './server.ts';
import type { LmdbBackend } from '../../src/store/lmdb/index.ts';

export interface ApiOptions {
  dataDir?: string;
  /** the service's environment, as startServer's `env` */
  env?: Record<string, string>;
  /** 'real': the service's inference engine (startEngine); 'none' (default): no models */
  engine?: 'real' | 'none';
  /** wait until /health/ready answers 200 (engine: real, its warm-up done) */
  ready?: boolean;
  /** how often the login throttle is swept (startupHooks; default THROTTLE_SWEEP_MS) */
  throttleSweepMs?: number;
  /** LMDB: the app's metering writes go through the process's metering writer thread, as an
   * API worker's do (default true); false: committed on this thread. Without effect on
   * PostgreSQL and with LMDB_COMMITS=batched, which have no writer. */
  meteringWriter?: boolean;
}

export interface ApiHandle {
  baseUrl: string;
  port: number;
  dataDir: string;
  /** the environment overrides it was started with (the CLI and in-process store use them) */
  env: Record<string, string>;
  config: import('../../src/config/index.ts').Config;
  /** the store the app serves from (an API worker's handle; tests may read and write through it) */
  store: import('../../src/store/index.ts').StoreBackend;
  /** the main thread's handle (start-up steps, jobs, the CLI); `store` itself where the app has
   * no metering writer */
  mainStore: import('../../src/store/index.ts').StoreBackend;
  /** LMDB: the main thread's raw store (its databases, for the store's own functions, which
   * commit on this thread as a thread without the metering writer does); null on PostgreSQL */
  lmdb: import('../../src/store/lmdb/index.ts').LmdbBackend['store'] | null;
  /** the router as registered (tests of the route table) */
  router: import('../../src/http/router.ts').Router;
  /** what the start-up hooks left running (src/startup.ts), stopped by stop() */
  jobs: import('../../src/startup.ts').StartupJobs;
  logs: string[];
  /** parsed JSON log lines */
  logLines(): any[];
  cli(args: string[], stdin?: string): Promise<CliResult>;
  /** closes the app (its connections dropped), the engine and the store */
  stop(): Promise<void>;
}

// The environment this process started with: each harness's configuration is read from it and
// its own settings, never from another harness's settings applied below.
const STARTING_ENV = { ...process.env };

/** Module-level readers of the environment (see the header): set before the service loads. */
function applyEnv(env: Record<string, string>): () => void {
  const saved = new Map(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  return () => {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

/** Starts the API in this process on an ephemeral loopback port with a temporary DATA_DIR
 * (the same defaults as startServer, one API worker). */
export async function startApi(opts: ApiOptions = {}): Promise<ApiHandle> {
  const dataDir = opts.dataDir ?? path.join(tempDir(), 'data');
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    WORKERS: '1',
    INFERENCE_THREADS: '1',
    WARMUP_RUNS: '2',
    INFERENCE_BACKEND: 'native',
    LOG_LEVEL: 'info',
    ...opts.env,
  };
  const restoreEnv = applyEnv(env);
  // loaded now, after the environment: see the header
  const { setClockFile } = await import('../../src/clock.ts');
  const { loadConfig } = await import('../../src/config/index.ts');
  const { PARAMS } = await import('../../src/auth/password.ts');
  const { bootstrapAdmin } = await import('../../src/admin/index.ts');
  const { startupHooks } = await import('../../src/startup.ts');
  const { closeApp, composeApiWorker, createAdmissionTable, createBalanceTable, describeUwsBuild, listen, loadUws, LISTEN_EXCLUSIVE } = await import('../../src/http/index.ts');
  const { aggregateMetrics, createLogger, MainMetrics, RefundMetrics, stopThreadTracing } = await import('../../src/observability/index.ts');
  const { geoDatabase } = await import('../../src/metering/index.ts');
  const { openConfiguredStore, storeWriterChannel } = await import('../../src/store/index.ts');
  const { WriterClient } = await import('../../src/store/lmdb/writer-client.ts');
  const { startEngine } = await import('../../src/cluster/engine-host.ts');
  const { createReadinessBoard, publishReadiness, relayInference, RemoteInference } = await import('../../src/cluster/index.ts');

  const wantN = Number(env.TEST_PASSWORD_SCRYPT_N ?? NaN);
  if (Number.isInteger(wantN) && PARAMS.N !== wantN) {
    restoreEnv();
    throw new Error(`startApi: TEST_PASSWORD_SCRYPT_N=${wantN} asked, but the password module was loaded earlier in this process with N=${PARAMS.N}`);
  }
  setClockFile(env.CLOCK_FILE || undefined);

  const config = loadConfig({ ...STARTING_ENV, ...env });
  const logs: string[] = [];
  let partial = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      partial += chunk.toString();
      let i: number;
      while ((i = partial.indexOf('\n')) >= 0) {
        logs.push(partial.slice(0, i));
        partial = partial.slice(i + 1);
      }
      done();
    },
  });
  const log = createLogger(config.LOG_LEVEL, { worker: 0 }, sink);
  const uws = loadUws();
  const onStoreError = (err: Error) => log.warn({ err: { message: err.message } }, 'store connection error');
  const mainStore = await openConfiguredStore(config, onStoreError, log);
  const refunds = new RefundMetrics();
  await bootstrapAdmin(mainStore, config, log);
  // its first prune awaited too: a test's first calls find the store as a started service's
  // soon does (src/main.ts does not wait for it)
  const jobs = await startupHooks(mainStore, config, log, (module, units) => refunds.refunded(module, units), opts.throttleSweepMs);
  await jobs.firstPrune;
  // the API worker's store, with its channel to the writer the main thread's store starts (as
  // src/cluster/cluster.ts gives each worker one, after the start-up steps)
  const writerChannel = opts.meteringWriter === false ? null : storeWriterChannel(mainStore);
  const store = writerChannel ? await openConfiguredStore(config, onStoreError, log, new WriterClient(writerChannel.port)) : mainStore;
  // a fault planted in the writer (test/verify/world.ts diskFull) reaches it through the main handle
  if (writerChannel) (await import('./lmdb.ts')).noteApiWorkerHandle(store as LmdbBackend, mainStore as LmdbBackend);

  const none = { readiness: () => [], infer: () => Promise.reject(new Error('startApi: no engine (engine: none)')), poolTimes: () => null, poolMetrics: () => [] as unknown[][] };
  const engine = opts.engine === 'real' ? startEngine(config, log, (id) => store.moduleEnabled(id)) : null;
  const stats = engine ?? none;
  const main = new MainMetrics(stats, describeUwsBuild(), mainStore);
  // the thread hop of src/worker.ts and src/cluster/cluster.ts, both ends in this thread
  const channel = new MessageChannel();
  let inference: import('../../src/inference/index.ts').InferenceService = none;
  if (engine) {
    // the engine's readiness published as the cluster publishes it (src/cluster/shared-readiness.ts)
    const board = createReadinessBoard();
    publishReadiness(board, engine.readiness());
    engine.onReadinessChange((modules) => publishReadiness(board, modules));
    const remote = new RemoteInference(channel.port1, config.INFERENCE_TIMEOUT_SECONDS * 1000, () => api.metrics.lateInferenceResults.inc(), board);
    channel.port2.on('message', (m: import('../../src/cluster/index.ts').FromWorker) => {
      relayInference(engine, channel.port2, m, (err) => log.error({ err: { message: err.message } }, 'inference failed'));
    });
    channel.port1.on('message', (m: import('../../src/cluster/index.ts').ToWorker) => {
      if (m.type === 'infer-done') remote.settle(m.id, m.results, m.error, m.timing);
    });
    inference = remote;
  }

  const api = composeApiWorker({
    config,
    uws,
    store,
    log,
    index: 0,
    admissionTable: createAdmissionTable(config.VERIFY_SLOTS),
    balanceTable: createBalanceTable(1),
    geo: geoDatabase(),
    inference,
    // what src/cluster/cluster.ts gathers: the main thread's registries, each worker's, the pool's
    collectMetrics: async () => aggregateMetrics([await main.snapshot(), await refunds.snapshot(), await api.metrics.snapshot(), ...(stats.poolMetrics() as Awaited<ReturnType<typeof main.snapshot>>[])]),
    requestModelSet: (request) => {
      if (!engine) throw new Error('startApi: a model-set activation needs engine: real');
      engine.requestActivation(request);
    },
  });
  const socket = await listen(api.handle.app, config.HOST, 0, LISTEN_EXCLUSIVE);
  if (!socket) throw new Error(`startApi: could not listen on ${config.HOST}`);
  const port = uws.us_socket_local_port(socket as never);

  let stopped = false;
  const handle: ApiHandle = {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    env: opts.env ?? {},
    config,
    store,
    mainStore,
    lmdb: mainStore.kind === 'lmdb' ? (mainStore as unknown as import('../../src/store/lmdb/index.ts').LmdbBackend).store : null,
    router: api.router,
    jobs,
    logs,
    logLines: () => jsonLines(logs),
    // the CLI runs on the main thread's handle, as a CLI process commits its own writes (no
    // metering writer): never a second handle on its LMDB path here
    cli: (args, stdin) => runCli(dataDir, args, stdin, opts.env, mainStore),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      api.handle.startDrain();
      uws.us_listen_socket_close(socket);
      closeApp(api.handle.app);
      await jobs.stop();
      channel.port1.close();
      channel.port2.close();
      await engine?.close().catch(() => {});
      // as an API worker's stop: the spans still queued go first (bounded), and this thread's
      // tracing is reset for a later harness with other settings
      await stopThreadTracing();
      // the API worker's handle first (its queued audit lines go to the writer), then the main
      // thread's, whose close ends the writer once it has committed what it holds
      if (store !== mainStore) await store.close();
      await mainStore.close();
      restoreEnv();
      setClockFile(process.env.CLOCK_FILE || undefined);
    },
  };
  if (opts.ready) {
    // a start that never turns ready is stopped here: its handle never reaches the test, and its
    // app, engine threads and store would hold this process open (its settings still applied)
    await waitReady(handle.baseUrl).catch(async (err) => {
      await handle.stop();
      throw err;
    });
  }
  return handle;
}
