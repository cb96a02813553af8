import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

const DAY_MS = 86_400_000;
const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;
/** a day a pruner has claimed: `.pruning-<day>-<pid>-<random>` */
const CLAIMED_DIR = /^\.pruning-(\d{4}-\d{2}-\d{2})-\d+-[0-9a-f]+$/;
/** How long a claimed day may go unchanged before it counts as left by a pruner that died
 * while removing it. A live pruner touches its claim when it takes it and changes the folder
 * with each request folder it removes (milliseconds apart). */
export const ABANDONED_CLAIM_MS = 10 * 60_000;

/** The demo archive is DATA_DIR/archive/YYYY-MM-DD/<request>/: a whole UTC day goes once
 * its last moment is older than the cutoff. Names that are not days are left alone. */
export async function pruneArchiveBefore(dataDir: string, cutoff: number): Promise<number> {
  const root = path.join(dataDir, 'archive');
  let names: string[];
  try {
    names = await fs.readdir(root);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw e;
  }
  const expired = (day: string) => {
    const start = Date.parse(`${day}T00:00:00Z`);
    return Number.isFinite(start) && start + DAY_MS <= cutoff;
  };
  let removed = 0;
  for (const day of names.sort()) {
    if (!DAY_DIR.test(day) || !expired(day)) continue;
    // Several nodes may prune one shared archive (docs/several-nodes.md): a day is
    // claimed by renaming it, which only one of them can do, and only the claimant removes it.
    const claimed = path.join(root, `.pruning-${day}-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await fs.rename(path.join(root, day), claimed);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // another pruner took it
      throw e;
    }
    // a rename keeps the folder's time (its day's last upload): the claim is dated now, so
    // no other pruner takes it for a dead one's (below). An entry made and removed dates it
    // for whoever may remove the day (utimes would need its owner, on a shared archive).
    await fs.mkdir(path.join(claimed, '.claim')).then(() => fs.rmdir(path.join(claimed, '.claim'))).catch(() => {});
    removed += await removeClaimed(claimed);
  }
  // A pruner killed while it removed a day (a kill -9, a crash, a stop of the machine) left
  // its claim, which no later pass would have looked at again: every pass removes the claims
  // of expired days that have not changed for ABANDONED_CLAIM_MS. Two passes may take the same
  // one; what the other removed first is no error.
  for (const name of names) {
    const day = CLAIMED_DIR.exec(name)?.[1];
    if (day === undefined || !expired(day)) continue;
    const claimed = path.join(root, name);
    const stat = await fs.stat(claimed).catch(() => null);
    if (!stat?.isDirectory() || Date.now() - stat.mtimeMs < ABANDONED_CLAIM_MS) continue;
    removed += await removeClaimed(claimed);
  }
  return removed;
}

/** Removes a claimed day; answers how many request folders it held. */
async function removeClaimed(claimed: string): Promise<number> {
  try {
    const n = (await fs.readdir(claimed)).length;
    await fs.rm(claimed, { recursive: true, force: true });
    return n;
  } catch (e) {
    // a leftover another pass removes at the same moment
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTEMPTY') return 0;
    throw e;
  }
}
