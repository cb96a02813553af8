import fs from 'node:fs';

// Quota windows and expiry depend on the time of day. Tests move the clock of a running
// server (all its threads and the CLI at once) by writing an ISO time or epoch ms into
// CLOCK_FILE; production never sets it.
let clockFile: string | undefined = process.env.CLOCK_FILE || undefined;

// With the shared PostgreSQL store, quota windows and record times follow the database's
// clock, not each node's: the store measures how far this thread's clock is from the
// database's at every lease renewal (src/store/pg/lease.ts) and sets the offset here, so
// nodes whose clocks disagree still charge the same day's window. TEST_CLOCK_SKEW_MS (testing
// only) puts a node's own clock off by that much, to prove it.
const skewMs = Number(process.env.TEST_CLOCK_SKEW_MS) || 0;
let offsetMs = 0;

/** Returns the file it replaces: a caller that sets it for a while (the CLI run in a test
 * process, src/cli/main.ts) puts that one back. */
export function setClockFile(file: string | undefined): string | undefined {
  const before = clockFile;
  clockFile = file;
  return before;
}

/** This thread's own clock (before any correction to the database's). */
export function localNow(): number {
  return Date.now() + skewMs;
}

/** Offset from this thread's clock to the shared store's (ms); 0 with LMDB. */
export function setClockOffset(ms: number): void {
  offsetMs = ms;
}

/** The offset set last (the CLI run in a test process puts it back after its store closes). */
export function clockOffset(): number {
  return offsetMs;
}

export function now(): number {
  if (clockFile === undefined) return localNow() + offsetMs;
  const text = fs.readFileSync(clockFile, 'utf8').trim();
  const ms = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(ms)) throw new Error(`CLOCK_FILE ${clockFile} holds no time: ${JSON.stringify(text)}`);
  return ms;
}

export function isoNow(): string {
  return new Date(now()).toISOString();
}
