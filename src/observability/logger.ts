import pino, { type Logger } from 'pino';

export type { Logger };

// One JSON line per event on stdout. Secrets and image bytes never reach a log call; the
// redaction list is a second line of defence for headers that might be logged by mistake.
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    redact: { paths: ['authorization', 'headers.authorization', 'headers.cookie', 'token', 'password'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
