import t from 'tap';
import { loadConfig } from '../../src/config/index.ts';

t.test('WORKERS is sized for uploads (8 per core, at least 8); INFERENCE_THREADS follows the cores', async (t) => {
  const c = loadConfig({}, '/srv', 6);
  t.equal(c.WORKERS, 48);
  t.equal(c.INFERENCE_THREADS, 6);
  t.equal(loadConfig({}, '/srv', 1).WORKERS, 8, 'a small host still gets 8 API workers (16 slots)');
});

t.test('a host with more cores than the accepted range still starts on the defaults', async (t) => {
  const c = loadConfig({}, '/srv', 300);
  t.equal(c.WORKERS, 64, 'WORKERS stops at its maximum');
  t.equal(c.INFERENCE_THREADS, 256, 'INFERENCE_THREADS stops at its maximum');
  t.throws(() => loadConfig({ WORKERS: '65' }, '/srv', 300), /WORKERS/, 'an explicit value past the range is still refused');
});

t.test('upload pacing and the concurrency caps default to device-friendly shares of the host', async (t) => {
  const c = loadConfig({ WORKERS: '16' }, '/srv', 2);
  t.equal(c.UPLOAD_MIN_BYTES_PER_SECOND, 8000, 'minimum rate at most 8 KB/s');
  t.equal(c.UPLOAD_RATE_WINDOW_SECONDS, 10);
  t.equal(c.UPLOAD_DEADLINE_SECONDS, 600);
  // a lone tenant may use every slot: fair shares, not fixed caps, keep a busy host shared
  t.equal(c.UPLOADS_PER_ADDRESS, 32, 'one address: all 32 slots');
  t.equal(c.UPLOADS_PER_TOKEN, 32, 'one token: all 32 slots');
  const small = loadConfig({ WORKERS: '2' }, '/srv', 2);
  t.same([small.UPLOADS_PER_ADDRESS, small.UPLOADS_PER_TOKEN], [4, 4], 'the host\'s slots');
  const one = loadConfig({ WORKERS: '1' }, '/srv', 2);
  t.same([one.UPLOADS_PER_ADDRESS, one.UPLOADS_PER_TOKEN], [2, 2]);
  t.equal(loadConfig({ UPLOADS_PER_ADDRESS: '3' }, '/srv', 2).UPLOADS_PER_ADDRESS, 3, 'set explicitly');
  t.throws(() => loadConfig({ UPLOADS_PER_ADDRESS: '0' }, '/srv', 2), /UPLOADS_PER_ADDRESS/);
  t.throws(() => loadConfig({ UPLOAD_MIN_BYTES_PER_SECOND: 'fast' }, '/srv', 2), /UPLOAD_MIN_BYTES_PER_SECOND/);
  t.throws(() => loadConfig({ UPLOAD_RATE_WINDOW_SECONDS: '1' }, '/srv', 2), /UPLOAD_RATE_WINDOW_SECONDS/);
});

t.test('GC_INITIAL_OLD_SPACE_MB: 64 by default, 0 for V8\'s own default, nothing negative', async (t) => {
  t.equal(loadConfig({}, '/srv', 2).GC_INITIAL_OLD_SPACE_MB, 64);
  t.equal(loadConfig({ GC_INITIAL_OLD_SPACE_MB: '0' }, '/srv', 2).GC_INITIAL_OLD_SPACE_MB, 0);
  t.throws(() => loadConfig({ GC_INITIAL_OLD_SPACE_MB: '-1' }, '/srv', 2), /GC_INITIAL_OLD_SPACE_MB/);
});

t.test('the version the service reports is package.json\'s', async (t) => {
  const { SERVICE_VERSION } = await import('../../src/version.ts');
  const { readFileSync } = await import('node:fs');
  t.equal(SERVICE_VERSION, JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
});
