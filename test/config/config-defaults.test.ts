import t from 'tap';
import { loadConfig, type Config } from '../../src/config/index.ts';

const pick = (c: Config) => [c.WORKERS, c.VERIFY_SLOTS, c.UPLOADS_PER_ADDRESS];

t.test('WORKERS is sized for uploads (8 per core, at least 8) with the spec\'s 2 slots each; INFERENCE_THREADS follows the cores', async (t) => {
  const c = loadConfig({}, '/srv', 6);
  t.equal(c.WORKERS, 48);
  t.equal(c.VERIFY_SLOTS, 96, '2 slots per API worker');
  t.same([c.UPLOADS_PER_ADDRESS, c.UPLOADS_PER_TOKEN], [96, 96], 'the caps default to every slot');
  t.equal(c.INFERENCE_THREADS, 6);
  t.same(pick(loadConfig({}, '/srv', 1)), [8, 16, 16], 'a small host still gets 8 API workers (16 slots)');
});

t.test('WORKERS set alone keeps 2 slots per API worker; VERIFY_SLOTS, set, sizes the slots apart from WORKERS', async (t) => {
  t.same(pick(loadConfig({ WORKERS: '16' }, '/srv', 2)), [16, 32, 32]);
  t.same(pick(loadConfig({ WORKERS: '3' }, '/srv', 8)), [3, 6, 6]);
  t.same(pick(loadConfig({ VERIFY_SLOTS: '40' }, '/srv', 2)), [16, 40, 40], 'slots alone: the workers stay at their default');
  t.same(pick(loadConfig({ WORKERS: '2', VERIFY_SLOTS: '32' }, '/srv', 2)), [2, 32, 32], 'the slots of the default on 2 API workers (bench/results/cpu-per-capture.md)');
  t.same(pick(loadConfig({ WORKERS: '', VERIFY_SLOTS: '' }, '/srv', 2)), [16, 32, 32], 'empty means unset');
  t.throws(() => loadConfig({ VERIFY_SLOTS: '0' }, '/srv', 2), /VERIFY_SLOTS/);
  t.throws(() => loadConfig({ VERIFY_SLOTS: '129' }, '/srv', 2), /VERIFY_SLOTS/, 'at most 128, the caps\' range');
  t.throws(() => loadConfig({ VERIFY_SLOTS: 'many' }, '/srv', 2), /VERIFY_SLOTS/);
});

t.test('a host with more cores than the accepted range still starts on the defaults', async (t) => {
  const c = loadConfig({}, '/srv', 300);
  t.equal(c.WORKERS, 64, 'WORKERS stops at its maximum');
  t.equal(c.VERIFY_SLOTS, 128, '2 per API worker');
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

t.test('GC_INITIAL_OLD_SPACE_MB: 0 (V8\'s own sizing) by default, an operator\'s size kept, nothing negative', async (t) => {
  t.equal(loadConfig({}, '/srv', 2).GC_INITIAL_OLD_SPACE_MB, 0);
  t.equal(loadConfig({ GC_INITIAL_OLD_SPACE_MB: '64' }, '/srv', 2).GC_INITIAL_OLD_SPACE_MB, 64);
  t.throws(() => loadConfig({ GC_INITIAL_OLD_SPACE_MB: '-1' }, '/srv', 2), /GC_INITIAL_OLD_SPACE_MB/);
});

t.test('the version the service reports is package.json\'s', async (t) => {
  const { SERVICE_VERSION } = await import('../../src/version.ts');
  const { readFileSync } = await import('node:fs');
  t.equal(SERVICE_VERSION, JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
});
