import pino, { type Logger } from 'pino';
import { printable } from '../printable.ts';

export type { Logger };

// One JSON line per event on stdout. Secrets and image bytes never reach a log call; the
// redaction list is a second line of defence for headers that might be logged by mistake.
// Lines carry text callers chose (a login's username, a path, an error naming a part): pino
// escapes only what JSON requires, so C1 controls and bidi overrides went into the line raw,
// for the terminal or viewer an operator reads it with to run or reorder. Each line is made
// printable (src/printable.ts): the same JSON, those characters as \uXXXX escapes.
// `destination`: where the lines go instead of stdout (the in-process test harness keeps them,
// test/helpers/api.ts; a test process's stdout is its TAP stream).
export function createLogger(level: string, bindings: Record<string, unknown> = {}, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: ['authorization', 'headers.authorization', 'headers.cookie', 'token', 'password'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: { streamWrite: printable },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Writes out, before the call returns, whatever the logger still holds: pino's stdout stream
 * writes asynchronously, so a process that ends by SIGKILL right after a log call (a stop whose
 * store cannot close) lost its last lines, the one saying why among them (seen: the suite's
 * stalled-writer test, twice in two full runs). A stream that cannot flush now is left as is. */
export function flushLogSync(log: Logger): void {
  const stream = (log as unknown as Record<symbol, { flushSync?: () => void } | undefined>)[pino.symbols.streamSym];
  try {
    stream?.flushSync?.();
  } catch {
    // a write in progress that cannot be completed synchronously: nothing more can be done
  }
}

/** Waits (at most `boundMs`) for the logger's writes in flight, then writes out the rest before
 * returning. flushLogSync alone is not enough: an asynchronous write already handed to the
 * thread pool cannot be finished synchronously, and it held the line saying why the process
 * was about to kill itself (lost in 2 of 3 full suite runs even with the synchronous flush).
 * sonic-boom says a write is in flight only through its `_writing` field: read here, bounded. */
export async function drainLog(log: Logger, boundMs: number): Promise<void> {
  const stream = (log as unknown as Record<symbol, { _writing?: boolean } | undefined>)[pino.symbols.streamSym];
  const until = Date.now() + boundMs;
  while (stream?._writing === true && Date.now() < until) await new Promise((r) => setTimeout(r, 2));
  flushLogSync(log);
}
