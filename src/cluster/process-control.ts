// How this process starts and stops, whatever phase it is in: start-up goes through named
// steps under the watchdog, and a stop (a signal, a lost parent, a crash loop) ends it cleanly
// at any of them, closing what is open so far; once the API workers exist the cluster drains.
import { StartupWatchdog, watchParent } from '../lifecycle.ts';
import type { Logger } from '../observability/index.ts';
import type { StoreBackend } from '../store/index.ts';
import type { Cluster } from './cluster.ts';
import type { EngineHost } from './engine-host.ts';

/** What a stop waits for at most, when it comes before the API workers exist: the inference
 * engine's close (its threads must be out of the native runtime first, src/inference/pool.ts)
 * and the store's. */
const EARLY_STOP_WAIT_MS = 35_000;

async function holdHere(log: Logger, step: string, block: boolean): Promise<void> {
  log.warn({ TEST_START_HOLD: process.env.TEST_START_HOLD, step }, 'testing only: start-up holds here for ever (TEST_START_HOLD); never set this in production');
  if (block) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  await new Promise(() => {});
}

const bounded = (p: Promise<unknown>, ms: number) => Promise.race([p.catch(() => {}), new Promise<void>((r) => setTimeout(r, ms).unref())]);

/** What is open so far, for a stop that comes before the cluster exists: start-up sets each
 * as it opens it. */
export interface OpenParts {
  store: StoreBackend | null;
  engine: EngineHost | null;
  stopRetention: (() => Promise<void>) | null;
  cluster: Cluster | null;
}

/** One per process, made first in main(): from then on signals are handled. */
export class ProcessControl {
  readonly open: OpenParts = { store: null, engine: null, stopRetention: null, cluster: null };
  private readonly watchdog: StartupWatchdog;
  /** set by a stop asked for before the cluster existed: start-up ends at its next step */
  private earlyStop: Promise<never> | null = null;
  private signals = 0;
  /** TEST_START_HOLD=<part of a step's name>[:block], testing only: start-up stops at that step
   * for ever, waiting (the event loop runs) or, with `:block`, with the main thread blocked (as
   * in issue 39's hang), so that tests can see the watchdog and its backstop fire. Read here,
   * not at module load: an API worker's bundle, which shares src/cluster/, reads nothing of it. */
  private readonly hold = process.env.TEST_START_HOLD ? { step: process.env.TEST_START_HOLD.replace(/:block$/, ''), block: process.env.TEST_START_HOLD.endsWith(':block') } : null;

  constructor(private readonly log: Logger, startTimeoutSeconds: number) {
    // Past START_TIMEOUT_SECONDS a start that has not listened logs what it waits for and exits
    // 1; the engine is closed first, as on any exit (its threads may be in the native runtime).
    this.watchdog = new StartupWatchdog(log, startTimeoutSeconds, () => void this.exitAfterEngine(1));
    // Signals are handled from the first moment, whatever start-up is doing: the first stops the
    // service cleanly (exit 0) at any point of its start-up or service (issue 39: a stop during
    // inference warm-up used to abort), the second is acknowledged (Ctrl-C under npm reaches node
    // twice: npm forwards its own SIGINT to the process group, so a second signal must not cut
    // the drain short), and a third stops without waiting for in-flight calls (exit 1), the
    // inference threads still let out of the native runtime first.
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      process.on(sig, () => {
        this.signals++;
        if (this.signals === 1) this.stop(0);
        else if (this.signals === 2) log.warn({ signal: sig }, 'already stopping: in-flight calls finish first; a third signal stops at once');
        else {
          log.warn({ signal: sig }, 'third signal: stopping now, without waiting for in-flight calls (start-up recovery refunds their reservations)');
          void this.exitAfterEngine(1);
        }
      });
    }
    watchParent(log, () => this.stop(0));
  }

  /** Between steps: a stop asked for meanwhile ends start-up here. */
  async step(name: string): Promise<void> {
    if (this.earlyStop) await this.earlyStop;
    this.watchdog.step(name);
    if (this.hold && name.includes(this.hold.step)) await holdHere(this.log, name, this.hold.block);
  }

  /** Start-up is over: the API workers listen. */
  started(): void {
    this.watchdog.done();
  }

  stop(code: number): void {
    if (this.open.cluster) void this.open.cluster.stop(code);
    else void this.closeEarly(code, 'stopping during start-up');
  }

  /** Exits with `code` once the engine has closed (bounded): its threads leave the native
   * runtime first, since exiting terminates a thread inside it (an abort). */
  async exitAfterEngine(code: number): Promise<never> {
    await bounded(this.open.engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
    process.exit(code);
  }

  private closeEarly(code: number, why: string): Promise<never> {
    this.earlyStop ??= (async () => {
      this.watchdog.done();
      this.log.info({ code, phase: this.watchdog.waitingFor }, why);
      await bounded(this.open.engine?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      await bounded(this.open.stopRetention?.() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      await bounded(this.open.store?.close() ?? Promise.resolve(), EARLY_STOP_WAIT_MS);
      this.log.info({ code }, 'stopped');
      process.exit(code);
    })();
    return this.earlyStop;
  }
}
