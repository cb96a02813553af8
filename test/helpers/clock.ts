import fs from 'node:fs';
import path from 'node:path';

/** The time a server and its CLI read from CLOCK_FILE, set by the test: `file` goes into the
 * server's env, `set` moves it, `now()` is what it says. */
export function fileClock(dir: string, startIso: string): { file: string; now(): number; set(ms: number): void } {
  const file = path.join(dir, 'clock');
  let at = Date.parse(startIso);
  const set = (ms: number) => {
    at = ms;
    fs.writeFileSync(file, new Date(ms).toISOString());
  };
  set(at);
  return { file, now: () => at, set };
}
