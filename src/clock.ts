import fs from 'node:fs';

// Quota windows and expiry depend on the time of day. Tests move the clock of a running
// server (all its threads and the CLI at once) by writing an ISO time or epoch ms into
// CLOCK_FILE; production never sets it.
let clockFile: string | undefined = process.env.CLOCK_FILE || undefined;

export function setClockFile(file: string | undefined): void {
  clockFile = file;
}

export function now(): number {
  if (clockFile === undefined) return Date.now();
  const text = fs.readFileSync(clockFile, 'utf8').trim();
  const ms = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isFinite(ms)) throw new Error(`CLOCK_FILE ${clockFile} holds no time: ${JSON.stringify(text)}`);
  return ms;
}

export function isoNow(): string {
  return new Date(now()).toISOString();
}
