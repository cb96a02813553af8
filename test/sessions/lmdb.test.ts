import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { fileClock } from '../helpers/clock.ts';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { ENV, sessionRules, START } from './rules.ts';

// Device sessions (issue 26) on the default store, LMDB in DATA_DIR.
t.setTimeout(480_000);
const dataDir = tempDir();
const clock = fileClock(dataDir, START);
const server = await startApi({ dataDir, engine: 'real', ready: true, env: { ...ENV, CLOCK_FILE: clock.file } });
t.teardown(() => server.stop());

sessionRules(t, {
  server,
  clock,
  // LMDB writes strings as they are (msgpack): a plaintext kept anywhere in the file would be found
  storeHolds: async (text) => fs.readFileSync(path.join(dataDir, 'store', 'data.mdb')).includes(Buffer.from(text)),
});
