import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

const DAY_MS = 86_400_000;
const DAY_DIR = /^\d{4}-\d{2}-\d{2}$/;

/** The demo archive is DATA_DIR/archive/YYYY-MM-DD/<request>/: a whole UTC day goes once
 * its last moment is older than the cutoff. Names that are not days are left alone. */
export async function pruneArchiveBefore(dataDir: string, cutoff: number): Promise<number> {
  const root = path.join(dataDir, 'archive');
  let days: string[];
  try {
    days = await fs.readdir(root);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw e;
  }
  let removed = 0;
  for (const day of days.sort()) {
    if (!DAY_DIR.test(day)) continue;
    const start = Date.parse(`${day}T00:00:00Z`);
    if (!Number.isFinite(start) || start + DAY_MS > cutoff) continue;
    // Several nodes may prune one shared archive (docs/several-nodes.md): a day is
    // claimed by renaming it, which only one of them can do, and only the claimant removes it.
    const claimed = path.join(root, `.pruning-${day}-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await fs.rename(path.join(root, day), claimed);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // another pruner took it
      throw e;
    }
    removed += (await fs.readdir(claimed)).length;
    await fs.rm(claimed, { recursive: true, force: true });
  }
  return removed;
}
