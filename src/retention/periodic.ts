/** A job run beside serving on a clock (the pruners, the login throttle's sweep, PostgreSQL's
 * lease sweep). */
export interface Periodic {
  /** Starts a run now, or answers the run under way: never two at once (a first pass that
   * indexes a large store may outlast its period). After stop(), starts none. */
  run(): Promise<void>;
  /** No run starts any more; resolves when the run under way, if any, has ended (so the store
   * can close after it). */
  stop(): Promise<void>;
}

/** Runs `job` every `everyMs` (the timer does not hold the process), one run at a time. `job`
 * reports its own failures and must not reject: the next tick simply runs it again. */
export function periodic(job: () => Promise<void>, everyMs: number): Periodic {
  let running: Promise<void> | null = null;
  let stopped = false;
  const run = (): Promise<void> => {
    if (stopped) return running ?? Promise.resolve();
    return (running ??= job().finally(() => {
      running = null;
    }));
  };
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return {
    run,
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
