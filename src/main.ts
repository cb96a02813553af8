import { bootstrapAdmin } from './admin/index.ts';
import { announceListening, Cluster, ProcessControl, probePort, startEngine, tuneGc } from './cluster/index.ts';
import { ConfigError, loadConfig, testingSettings, type Config } from './config/index.ts';
import { checkTls, compileTrust, loadUws, NativeBindingError } from './http/index.ts';
import { createLogger, otelProblems, RefundMetrics } from './observability/index.ts';
import { markRunning, ServerRunningError } from './lifecycle.ts';
import { startRetention } from './retention/index.ts';
import { openConfiguredStore, privateDataDir, removeKilledRestores, StoreError } from './store/index.ts';
import { startupHooks } from './startup.ts';

// The service's process: this file only composes it, in start-up's order. The main thread owns
// what is one per process (the store it recovers, the inference engine, the API worker threads
// and the signals, src/cluster/) and relays between API workers; it serves no HTTP itself.

/** The configuration, or a one-line error and exit 2. */
function configOrExit(): Config {
  try {
    const config = loadConfig();
    try {
      compileTrust(config.TRUSTED_PROXIES);
    } catch (e) {
      throw new ConfigError(`TRUSTED_PROXIES: ${(e as Error).message} (addresses, CIDR ranges or loopback/linklocal/uniquelocal)`);
    }
    checkTls(config);
    return config;
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
}

async function main(): Promise<void> {
  const config = configOrExit();
  tuneGc(config);
  const log = createLogger(config.LOG_LEVEL, { thread: 'main' });
  // from here on a signal stops the process cleanly, whatever start-up is doing
  const control = new ProcessControl(log, config.START_TIMEOUT_SECONDS);
  const open = control.open;

  try {
    await control.step('the HTTP module');
    const uws = loadUws();
    // before the store, the keys or the demo archive write anything (issue 29)
    for (const problem of privateDataDir(config.DATA_DIR)) log.warn(problem);
    // testing-only settings (weaker password hashing, injected faults, a file clock) must
    // never pass unnoticed: a production build reads them too (src/config/env.ts, issue 40)
    const testing = testingSettings();
    if (testing.length > 0) log.warn({ testing_settings: testing }, `TESTING ONLY settings are set (${testing.join(', ')}): they weaken or fake parts of the service; never set them in production (docs/configuration.md)`);
    // the OTEL_* values tracing will ignore (the OpenTelemetry convention), said now
    for (const problem of otelProblems(process.env)) log.warn(problem);
    // one server per DATA_DIR (restore refuses a DATA_DIR with a running server); the mark
    // goes with the process, before the store opens, so a second server touches nothing. A
    // mark of another PID namespace (a container that crashed, started again) is watched
    // until it proves alive or goes stale: at most MARK_STALE_REFRESHES x MARK_REFRESH_MS
    await control.step("DATA_DIR's server mark");
    try {
      process.once('exit', await markRunning(config.DATA_DIR));
    } catch (e) {
      if (e instanceof ServerRunningError) throw new ConfigError(e.message);
      // a DATA_DIR this process cannot write (its owner, a read-only file system)
      throw new ConfigError(`DATA_DIR ${config.DATA_DIR} cannot be written: ${(e as Error).message}`);
    }
    // the copy of the store a restore killed mid-way left (no restore runs while the mark is ours)
    for (const leftover of removeKilledRestores(config.DATA_DIR)) log.warn({ removed: leftover }, 'removed the copy a killed restore left in DATA_DIR');
    await control.step(config.DATABASE_URL ? 'the PostgreSQL store to open' : 'the LMDB store to open');
    const store = await openConfiguredStore(config, (err) => log.warn({ err: { message: err.message } }, 'store connection error'), log);
    open.store = store;
    await control.step('the administrator bootstrap');
    await bootstrapAdmin(store, config, log);
    const refunds = new RefundMetrics();
    await control.step('start-up recovery (signing key, pending reservations)');
    const jobs = await startupHooks(store, config, log, (module, units) => refunds.refunded(module, units));
    await control.step('the inference engine to start');
    const retention = startRetention(store, config, log);
    // the store's background jobs stop before it closes: the pruners' next passes, and the
    // login throttle's sweep, whose run under way is waited for
    open.stopRetention = () => Promise.all([retention(), jobs.stop()]).then(() => undefined);
    // the module switch: a model-set activation may leave only disabled modules unready
    const engine = startEngine(config, log, (id) => store.moduleEnabled(id));
    open.engine = engine;
    await control.step('the listen port');
    const port = await probePort(uws, config);
    await control.step('the API workers to listen');
    const cluster = new Cluster(config, log, engine, store, retention, refunds);
    open.cluster = cluster;
    await cluster.start(port);
    if (cluster.stopping) return; // a stop came while the workers started: it exits
    control.started();
    await announceListening(log, config, port, store);
  } catch (e) {
    if (e instanceof ConfigError || e instanceof NativeBindingError || e instanceof StoreError) {
      log.fatal(e.message);
      process.stderr.write(`${e.message}\n`);
      // the engine may be warming up: its threads leave the native runtime first
      await control.exitAfterEngine(1);
    }
    throw e;
  }
}

await main();
