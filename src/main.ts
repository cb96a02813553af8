import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { bootstrapAdmin } from './admin/index.ts';
import { startEngine, type EngineHost, type FromWorker, type ToWorker, type WorkerData, relayInference } from './cluster/index.ts';
import { ConfigError, loadConfig, SLOTS_PER_WORKER, testingSettings, type Config } from './config/index.ts';
import { compileTrust, checkTls, createBalanceTable, createAdmissionTable, releaseWorkerSlots, describeUwsBuild, listen, loadUws, LISTEN_EXCLUSIVE, NativeBindingError, uwsBuild, type UwsModule } from './http/index.ts';
import type { ModuleReadiness } from './inference/index.ts';
import { geoDatabase } from './metering/index.ts';
import { createLogger, type Logger, aggregateMetrics, MainMetrics, RefundMetrics, type MetricsSnapshot } from './observability/index.ts';
import { DRAIN_TIMEOUT_MS, markRunning, StartupWatchdog, watchParent } from './lifecycle.ts';
import { startRetention } from './retention/index.ts';
import { SOURCE_EXT, threadEntry } from './source-ext.ts';
import { type StoreBackend, StoreError, openConfiguredStore, privateDataDir } from './store/index.ts';
import { startupHooks } from './startup.ts';
import { now } from './clock.ts';

// The main thread owns what is one per process (the inference pool, start-up recovery,
// signals) and relays between API workers; it serves no HTTP itself.

/** LIBUS_LISTEN_EXCLUSIVE_PORT on a first bind makes a port that another program holds an
 * error; the workers then share the port with SO_REUSEPORT. PORT=0 resolves here. */
async function probePort(uws: UwsModule, config: Config): Promise<number> {
  const probe = uws.App();
  const socket = await listen(probe, config.HOST, config.PORT, LISTEN_EXCLUSIVE);
  if (!socket) throw new ConfigError(`cannot listen on ${config.HOST}:${config.PORT}: address in use or not available`);
  const port = uws.us_socket_local_port(socket as never);
  uws.us_listen_socket_close(socket);
  return port;
}

/** More worker losses than this within REPLACEMENT_WINDOW_MS is a crash loop, not a bad
 * request: the process then stops (exit 1) and leaves it to the supervisor. */
const MAX_REPLACEMENTS = 5;
const REPLACEMENT_WINDOW_MS = 60_000;

class Cluster {
  private workers: Worker[] = [];
  private draining = false;
  private port = 0;
  /** when recent workers were lost, for the crash-loop bound */
  private losses: number[] = [];
  private collections = new Map<number, { want: Set<Worker>; got: Map<Worker, MetricsSnapshot>; reply: (text: string, type: string) => void }>();
  private nextCollection = 1;
  private readonly metrics: MainMetrics;
  // one verify slot table for the host, so that admission does not depend on which worker the
  // kernel handed a connection to
  private admission: SharedArrayBuffer;
  // verify calls answered per worker, so a worker the kernel gave too many connections sheds some
  private balance: SharedArrayBuffer;
  // the country database, read once for every API worker (src/metering/geo.ts)
  private geo: SharedArrayBuffer | null;

  constructor(private config: Config, private log: Logger, private engine: EngineHost, private store: StoreBackend, private stopRetention: () => Promise<void>, private refunds: RefundMetrics) {
    this.metrics = new MainMetrics(engine, describeUwsBuild());
    this.admission = createAdmissionTable(config.WORKERS * SLOTS_PER_WORKER);
    this.balance = createBalanceTable(config.WORKERS);
    this.geo = geoDatabase();
  }

  async start(port: number): Promise<void> {
    this.port = port;
    const started: Promise<void>[] = [];
    for (let index = 0; index < this.config.WORKERS; index++) started.push(this.spawn(index));
    // readiness is pushed as it changes (warm-up, a failed module, a fallback, a switch)
    this.engine.onReadinessChange((modules) => this.broadcastReadiness(modules));
    this.broadcastReadiness(this.engine.readiness());
    await Promise.all(started);
  }

  /** Starts API worker `index`; resolves once it listens. */
  private spawn(index: number): Promise<void> {
    const port = this.port;
    // Compiled, the API worker runs as one bundled module (scripts/bundle.mjs: about 12 MB
    // less heap per worker than ~150 separate modules).
    const entry = threadEntry('worker.bundle.mjs', 'worker.ts');
    const data: WorkerData = { config: this.config, port, index, admission: this.admission, balance: this.balance, geo: this.geo, entry: entry.href };
    // Compiled JavaScript starts the thread directly; under tsx the thread must register the
    // loader first (thread-entry.mjs).
    // An API worker's allocations are small and short-lived (body bytes live outside the JS
    // heap), so a 2 MB young generation costs little GC time (single-png and rgb8 load at
    // c=4 did not move beside 4 MB) and saves committed heap per worker (about 7 MiB against
    // V8's default, 2 MiB against 4 MB), which counts when WORKERS is sized for slow uploads.
    const worker = new Worker(SOURCE_EXT === '.js' ? entry : new URL('./thread-entry.mjs', import.meta.url), {
      workerData: data,
      resourceLimits: { maxYoungGenerationSizeMb: 2 },
    });
    this.workers[index] = worker;
    let listening = false;
    const started = new Promise<void>((resolve, reject) => {
      const onMsg = (m: FromWorker) => {
        if (m.type === 'listening') {
          listening = true;
          resolve();
        }
        if (m.type === 'listen-failed') reject(new ConfigError(`API worker ${index} could not listen on ${this.config.HOST}:${port}`));
      };
      worker.on('message', onMsg);
      // an exit before listening is handled by replace() (it stops the process)
      worker.once('error', reject);
    });
    worker.on('message', (m: FromWorker) => this.onMessage(worker, m));
    worker.on('error', (err) => this.log.error({ err, worker: index }, 'API worker crashed'));
    // threadId reads -1 once the thread has exited: kept here for the recovery of what it held
    const thread = worker.threadId;
    worker.on('exit', (code) => {
      if (!this.draining) this.replace(index, worker, code, listening, thread);
    });
    return started;
  }

  /** An API worker ended while the process serves: free what it held in the shared tables and
   * start another in its place; the other workers serve on meanwhile. The reservations its
   * calls left pending are refunded and their keys released now, as start-up recovery would
   * for a dead process: records name the thread (LMDB) or the thread's node (PostgreSQL), so
   * the live workers' ones are not touched (recoverThread). */
  private replace(index: number, dead: Worker, code: number, listened: boolean, thread: number): void {
    if (this.workers[index] !== dead) return;
    const freed = releaseWorkerSlots(this.admission, index);
    this.forgetInCollections(dead);
    const now = Date.now();
    this.losses = [...this.losses.filter((t) => now - t < REPLACEMENT_WINDOW_MS), now];
    if (!listened || this.losses.length > MAX_REPLACEMENTS) {
      // a worker that cannot even start, or one dying over and over, would only loop here
      const why = listened ? `${this.losses.length} API workers lost within ${REPLACEMENT_WINDOW_MS / 1000} s` : 'it never started listening';
      this.log.fatal({ worker: index, code, freed_slots: freed }, `API worker exited (${why}); shutting down`);
      void this.stop(1);
      return;
    }
    this.log.error({ worker: index, code, freed_slots: freed }, 'API worker exited unexpectedly; starting a replacement');
    // (a process that stops instead leaves them to start-up recovery, with its store closing)
    this.recoverWorker(index, thread);
    this.spawn(index).then(
      () => {
        this.workers[index]!.postMessage({ type: 'readiness', modules: this.engine.readiness() } satisfies ToWorker);
        this.log.info({ worker: index }, 'API worker replaced');
      },
      (err: Error) => {
        // its own exit handler has already decided (shutdown when it never listened)
        this.log.error({ worker: index, err: { message: err.message } }, 'replacement API worker failed to start');
      },
    );
  }

  /** Refunds what dead API worker `thread` held; a failure leaves them to start-up recovery
   * (PostgreSQL: to the lease sweep), logged. */
  private recoverWorker(index: number, thread: number): void {
    const at = now();
    this.store.recoverThread(thread, at).then(
      (recovered) => {
        for (const r of recovered) {
          this.refunds.refunded(r.module_id, r.units);
          this.log.warn(
            { reservation: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, ...(r.node ? { holder_node: r.node } : { holder_pid: r.pid, holder_thread: r.thread ?? null }) },
            'worker recovery: pending reservation refunded, idempotency key released',
          );
        }
        this.log.warn({ worker: index, thread, recovered: recovered.length }, 'worker recovery finished');
      },
      (err: Error) => this.log.error({ worker: index, thread, err: { message: err.message } }, 'worker recovery failed; start-up recovery refunds what it held'),
    );
  }

  /** A metrics collection waiting on a worker that is gone completes without it. */
  private forgetInCollections(dead: Worker): void {
    for (const [id, c] of this.collections) {
      if (!c.want.delete(dead)) continue;
      c.got.delete(dead);
      this.completeCollection(id);
    }
  }

  private completeCollection(id: number): void {
    const c = this.collections.get(id);
    if (!c || c.got.size < c.want.size) return;
    this.collections.delete(id);
    void Promise.all([this.metrics.snapshot(), this.refunds.snapshot()])
      .then((own) => aggregateMetrics([...own, ...c.got.values(), ...(this.engine.poolMetrics() as MetricsSnapshot[])]))
      .then(({ text, contentType }) => c.reply(text, contentType))
      .catch((err: unknown) => this.log.error({ err }, 'metrics aggregation failed'));
  }

  private broadcastReadiness(modules: ModuleReadiness[]): void {
    for (const w of this.workers) w.postMessage({ type: 'readiness', modules } satisfies ToWorker);
  }

  private onMessage(worker: Worker, m: FromWorker): void {
    if (relayInference(this.engine, worker, m, (err) => this.log.error({ err: { message: err.message } }, 'inference failed'))) return;
    switch (m.type) {
      case 'metrics-request': {
        const id = this.nextCollection++;
        this.collections.set(id, {
          want: new Set(this.workers),
          got: new Map(),
          reply: (text, contentType) => worker.postMessage({ type: 'metrics-text', id: m.id, text, contentType } satisfies ToWorker),
        });
        for (const w of this.workers) w.postMessage({ type: 'metrics-snapshot', id } satisfies ToWorker);
        break;
      }
      case 'activate-model-set':
        this.engine.requestActivation(m.request);
        break;
      case 'metrics-snapshot': {
        const c = this.collections.get(m.id);
        if (!c || !c.want.has(worker)) break;
        c.got.set(worker, m.snapshot);
        this.completeCollection(m.id);
        break;
      }
      default:
        break;
    }
  }

  /** true once stop() has begun */
  get stopping(): boolean {
    return this.draining;
  }

  /** Drain: each worker closes its listen socket, finishes in-flight calls, closes its app. */
  async stop(code: number): Promise<never> {
    if (this.draining) return new Promise(() => {});
    this.draining = true;
    this.log.info({ workers: this.workers.length }, 'draining');
    const exits = this.workers.map((w) => new Promise<void>((r) => { w.once('exit', () => r()); }));
    for (const w of this.workers) w.postMessage({ type: 'drain' } satisfies ToWorker);
    const timeout = new Promise<void>((r) => setTimeout(r, DRAIN_TIMEOUT_MS).unref());
    await Promise.race([Promise.all([...exits, this.stopRetention()]), timeout]);
    await this.engine.close().catch(() => {});
    await this.store.close().catch(() => {});
    this.log.info({ code }, 'stopped');
    process.exit(code);
  }
}

/** A larger initial old generation for every thread started after this (API workers,
 * inference threads). Each verify call allocates about a megabyte of ArrayBuffers per frame
 * in its API worker (body parts, zlib output, pixels), and V8 starts a full collection
 * whenever external memory passes a limit derived from the heap's size; an API worker's heap
 * is small, so that was a major GC every dozen calls, and the GC threads took about a fifth
 * of the CPU. At 64 MB the API workers ran 4x fewer major GCs and single-png rose by 8-16 %
 * here, with the same idle and upload RSS (docs/capacity.md, "Memory"). V8 reads the flag when it
 * creates an isolate, so it is set before any worker starts. */
function tuneGc(config: Config): void {
  if (config.GC_INITIAL_OLD_SPACE_MB > 0) setFlagsFromString(`--initial-old-space-size=${config.GC_INITIAL_OLD_SPACE_MB}`);
  // Every API worker runs one full collection once it serves (src/worker.ts): loading and
  // compiling leave a few MiB of garbage per isolate, which an idle worker, or one whose old
  // generation stays under the size above, would otherwise keep resident for long. Threads
  // started after this get a global gc(); nothing else calls it.
  setFlagsFromString('--expose-gc');
}

/** What a stop waits for at most, when it comes before the API workers exist: the inference
 * engine's close (its threads must be out of the native runtime first, src/inference/pool.ts)
 * and the store's. */
const EARLY_STOP_WAIT_MS = 35_000;

/** TEST_START_HOLD=<part of a step's name>[:block], testing only: start-up stops at that step
 * for ever, waiting (the event loop runs) or, with `:block`, with the main thread blocked (as
 * in issue 39's hang), so that tests can see the watchdog and its backstop fire. */
const hold = process.env.TEST_START_HOLD ? { step: process.env.TEST_START_HOLD.replace(/:block$/, ''), block: process.env.TEST_START_HOLD.endsWith(':block') } : null;

async function holdHere(log: Logger, step: string, block: boolean): Promise<void> {
  log.warn({ TEST_START_HOLD: process.env.TEST_START_HOLD, step }, 'testing only: start-up holds here for ever (TEST_START_HOLD); never set this in production');
  if (block) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  await new Promise(() => {});
}

const bounded = (p: Promise<unknown>, ms: number) => Promise.race([p.catch(() => {}), new Promise<void>((r) => setTimeout(r, ms).unref())]);

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
    try {
      compileTrust(config.TRUSTED_PROXIES);
    } catch (e) {
      throw new ConfigError(`TRUSTED_PROXIES: ${(e as Error).message} (addresses, CIDR ranges or loopback/linklocal/uniquelocal)`);
    }
    checkTls(config);
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
  tuneGc(config);
  const log = createLogger(config.LOG_LEVEL, { thread: 'main' });

  // What is open so far, for a stop that comes before the cluster exists.
  let store: StoreBackend | null = null;
  let engine: EngineHost | null = null;
  let stopRetention: (() => Promise<void>) | null = null;
  let cluster: Cluster | null = null;
  // Past START_TIMEOUT_SECONDS a start that has not listened logs what it waits for and exits
  // 1; the engine is closed first, as on any exit (its threads may be in the native runtime).
  const watchdog = new StartupWatchdog(log, config.START_TIMEOUT_SECONDS, () => {
    void bounded(engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS).finally(() => process.exit(1));
  });
  /** set by a stop asked for before the cluster existed: start-up ends at its next step */
  let earlyStop: Promise<never> | null = null;
  const closeEarly = (code: number, why: string): Promise<never> => {
    earlyStop ??= (async () => {
      watchdog.done();
      log.info({ code, phase: watchdog.waitingFor }, why);
      await bounded(engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      await bounded(stopRetention?.() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      await bounded(store?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      log.info({ code }, 'stopped');
      process.exit(code);
    })();
    return earlyStop;
  };
  const stop = (code: number): void => {
    if (cluster) void cluster.stop(code);
    else void closeEarly(code, 'stopping during start-up');
  };

  // Signals are handled from the first moment, whatever start-up is doing: the first stops the
  // service cleanly (exit 0) at any point of its start-up or service (issue 39: a stop during
  // inference warm-up used to abort), the second is acknowledged (Ctrl-C under npm reaches node
  // twice: npm forwards its own SIGINT to the process group, so a second signal must not cut
  // the drain short), and a third stops without waiting for in-flight calls (exit 1), the
  // inference threads still let out of the native runtime first.
  let signals = 0;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      signals++;
      if (signals === 1) stop(0);
      else if (signals === 2) log.warn({ signal: sig }, 'already stopping: in-flight calls finish first; a third signal stops at once');
      else {
        log.warn({ signal: sig }, 'third signal: stopping now, without waiting for in-flight calls (start-up recovery refunds their reservations)');
        void bounded(engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS).finally(() => process.exit(1));
      }
    });
  }
  watchParent(log, () => stop(0));
  /** Between steps: a stop asked for meanwhile ends start-up here. */
  const step = async (name: string): Promise<void> => {
    if (earlyStop) await earlyStop;
    watchdog.step(name);
    if (hold && name.includes(hold.step)) await holdHere(log, name, hold.block);
  };

  try {
    await step('the HTTP module');
    const uws = loadUws();
    // before the store, the keys or the demo archive write anything (issue 29)
    for (const problem of privateDataDir(config.DATA_DIR)) log.warn(problem);
    // testing-only settings (weaker password hashing, injected faults, a file clock) must
    // never pass unnoticed: a production build reads them too (src/config/env.ts, issue 40)
    const testing = testingSettings();
    if (testing.length > 0) log.warn({ testing_settings: testing }, `TESTING ONLY settings are set (${testing.join(', ')}): they weaken or fake parts of the service; never set them in production (docs/configuration.md)`);
    await step(config.DATABASE_URL ? 'the PostgreSQL store to open' : 'the LMDB store to open');
    store = await openConfiguredStore(config, (err) => log.warn({ err: { message: err.message } }, 'store connection error'), log);
    const opened = store;
    // restore refuses a DATA_DIR with a running server; the mark goes with the process
    process.once('exit', markRunning(config.DATA_DIR));
    await step('the administrator bootstrap');
    await bootstrapAdmin(opened, config, log);
    const refunds = new RefundMetrics();
    await step('start-up recovery (signing key, pending reservations, idempotency pruning)');
    await startupHooks(opened, config, log, (module, units) => refunds.refunded(module, units));
    await step('the inference engine to start');
    const retention = startRetention(opened, config, log);
    stopRetention = retention;
    // the module switch: a model-set activation may leave only disabled modules unready
    const host = startEngine(config, log, (id) => opened.moduleEnabled(id));
    engine = host;
    await step('the listen port');
    const port = await probePort(uws, config);
    await step('the API workers to listen');
    const started = new Cluster(config, log, host, opened, retention, refunds);
    cluster = started;
    await started.start(port);
    if (started.stopping) return; // a stop came while the workers started: it exits
    watchdog.done();
    // the one line an operator starting it by hand reads: where it serves, where the console
    // is, and how to get into it when nobody can yet
    const scheme = config.TLS_CERT_FILE ? 'https' : 'http';
    const shown = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    const url = `${scheme}://${shown}:${port}`;
    const noAdmin = !(await opened.listUsers().catch(() => [])).some((u) => u.role === 'admin' && u.enabled);
    log.info(
      {
        host: config.HOST, port, workers: config.WORKERS, tls: Boolean(config.TLS_CERT_FILE), url, console_url: `${url}/admin`,
        // which HTTP build serves, and why a newer one did not (docs/platforms.md)
        node: process.version, uws: describeUwsBuild(),
        ...(uwsBuild()?.skipped.length ? { uws_skipped: uwsBuild()!.skipped } : {}),
        ...(noAdmin ? { first_admin: 'no administrator yet: npm run cli -- user create <name> --role admin (password on stdin), or start with ADMIN_USERNAME and ADMIN_PASSWORD' } : {}),
      },
      'listening',
    );
  } catch (e) {
    if (e instanceof ConfigError || e instanceof NativeBindingError || e instanceof StoreError) {
      log.fatal(e.message);
      process.stderr.write(`${e.message}\n`);
      // the engine may be warming up: its threads leave the native runtime first
      await bounded(engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      process.exit(1);
    }
    throw e;
  }
}

await main();
