// The country database is read once per process and shared with every API worker (a copy per
// thread cost 8 MB a worker); a worker reading the shared copy answers as the file does.

import t from 'tap';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { countryOf, geoDatabase, useGeoDatabase } from '../../src/metering/geo.ts';

t.test('the shared database answers like the file', async (t) => {
  const fromFile = countryOf('81.2.69.160');
  t.equal(fromFile, 'GB');
  const shared = geoDatabase();
  t.ok(shared instanceof SharedArrayBuffer && shared.byteLength > 1_000_000, 'the whole file, in shared memory');
  useGeoDatabase(shared);
  t.equal(countryOf('81.2.69.160'), 'GB');
  t.equal(countryOf('127.0.0.1'), null, 'loopback has no country');
  useGeoDatabase(null);
  t.equal(countryOf('81.2.69.160'), null, 'no database, no country (the file is not read behind the caller\'s back)');
});

t.test('another thread reads the same memory without a copy of its own', async (t) => {
  const shared = geoDatabase()!;
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { Reader } = require(${JSON.stringify(createRequire(import.meta.url).resolve('mmdb-lib'))});
    const r = new Reader(Buffer.from(workerData));
    parentPort.postMessage(r.get('81.2.69.160')?.country_code ?? null);
  `;
  const w = new Worker(code, { eval: true, workerData: shared });
  const answer = await new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
  await w.terminate();
  t.equal(answer, 'GB');
});
