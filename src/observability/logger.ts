import pino, { type Logger } from 'pino';

export type { Logger };

// One JSON line per event on stdout. Secrets and image bytes never reach a log call; the
// redaction list is a second line of defence for headers that might be logged by mistake.
// `destination`: where the lines go instead of stdout (the in-process test harness keeps them,
// test/helpers/api.ts; a test process's stdout is its TAP stream).
export function createLogger(level: string, bindings: Record<string, unknown> = {}, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: ['authorization', 'headers.authorization', 'headers.cookie', 'token', 'password'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
