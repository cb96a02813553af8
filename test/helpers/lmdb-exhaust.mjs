// Uses up the pages LMDB freed inside a store's file, on a file system that is already full:
// on a full disk LMDB still commits into those for a while, so only this makes the next
// commit of another process fail for certain. Writes until a one-record commit fails, prints
// "exhausted", and exits.
//
// A separate process because lmdb-js 3.5 can corrupt its heap once a commit has failed with
// ENOSPC, and aborts when such an environment is closed or the process exits (seen about one
// run in three): that must not take the test process with it. Usage: node lmdb-exhaust.mjs <store dir>
import { open } from 'lmdb';

const root = open({ path: process.argv[2], maxDbs: 32, compression: false });
const meta = root.openDB({ name: 'meta' });
for (let i = 0; ; i++) {
  try {
    // large values first, to get there quickly; small ones at the end, so that the failure
    // means not even one more page is free
    meta.putSync(`test_filler_${i}`, 'x'.repeat(i < 2000 ? 2000 : 100));
  } catch {
    process.stdout.write('exhausted\n');
    break;
  }
}
// no close: see above
process.exit(0);
