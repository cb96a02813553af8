import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// What a backup or a restore killed mid-way (kill -9, a crash, a stop of the machine) leaves:
// its scratch folder, as large as the store, which the `finally` that removes it never did.
// Each is removed by a later run that can tell it from a live one's (backup.ts for a backup's).

/** a restore's scratch folder in DATA_DIR: `.restore-<random>` */
const RESTORE_SCRATCH = /^\.restore-[0-9a-f]{8}$/;

/** A new restore scratch folder's path in `dataDir` (not made). */
export function restoreScratch(dataDir: string): string {
  return path.join(dataDir, `.restore-${randomBytes(4).toString('hex')}`);
}

/** Removes the scratch folders killed restores left in DATA_DIR; answers which. Only for a
 * caller that holds DATA_DIR's mark (a restore, a server start: lifecycle.ts markRunning): a
 * restore holds it for its whole run, so none runs now and every one is a leftover. (No age
 * test: a live restore reads its copy for a long time without writing it.) */
export function removeKilledRestores(dataDir: string): string[] {
  return removeLeftovers(dataDir, RESTORE_SCRATCH, (p) => fs.lstatSync(p).isDirectory());
}

/** Removes the entries of `dir` whose name matches `pattern` and that `left` judges left over;
 * answers which. */
export function removeLeftovers(dir: string, pattern: RegExp, left: (p: string) => boolean): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!pattern.test(name)) continue;
    const leftover = path.join(dir, name);
    try {
      if (!left(leftover)) continue;
      fs.rmSync(leftover, { recursive: true, force: true });
      removed.push(leftover);
    } catch {
      // another user's, or gone meanwhile: left as it is
    }
  }
  return removed;
}
