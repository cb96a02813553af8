import t from 'tap';
import { loadConfig } from '../../src/config/index.ts';

t.test('WORKERS and INFERENCE_THREADS default to the cores', async (t) => {
  const c = loadConfig({}, '/srv', 6);
  t.equal(c.WORKERS, 6);
  t.equal(c.INFERENCE_THREADS, 6);
});

t.test('a host with more cores than the accepted range still starts on the defaults', async (t) => {
  const c = loadConfig({}, '/srv', 300);
  t.equal(c.WORKERS, 64, 'WORKERS stops at its maximum');
  t.equal(c.INFERENCE_THREADS, 256, 'INFERENCE_THREADS stops at its maximum');
  t.throws(() => loadConfig({ WORKERS: '65' }, '/srv', 300), /WORKERS/, 'an explicit value past the range is still refused');
});
