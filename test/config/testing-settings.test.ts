import t from 'tap';
import { testingSettings } from '../../src/config/index.ts';

// Security issue 40, finding 10: TEST_PASSWORD_SCRYPT_N (weaker password hashing) and
// TEST_WORKER_FAULTS (a header crashes a handler) were read by production builds with no word
// at start. Every TEST_* variable and CLOCK_FILE set now draws a warning at start.
// The warning at a real start (src/main.ts logs it: a process's start-up, not the app's) is
// checked on test/observability/traces.test.ts's server, started with TEST_* settings
// (issue 43: this file's own server start is gone).

t.test('which settings count as testing-only', async (t) => {
  t.same(testingSettings({ HOST: '0.0.0.0', PORT: '80', NODE_ENV: 'production' }), [], 'none: nothing to say');
  t.same(testingSettings({ TEST_WORKER_FAULTS: '1', TEST_PASSWORD_SCRYPT_N: '1024', CLOCK_FILE: '/tmp/c', TEST_SOMETHING_NEW: 'x', TEST_EMPTY: '' }), ['CLOCK_FILE', 'TEST_PASSWORD_SCRYPT_N', 'TEST_SOMETHING_NEW', 'TEST_WORKER_FAULTS'], 'every TEST_* and CLOCK_FILE set, an unknown one included; empty ones are unset');
});

t.test('TEST_CLOCK_SKEW_MS may be negative (a node behind), as its schema and src/clock.ts allow', async (t) => {
  const { loadConfig } = await import('../../src/config/index.ts');
  t.equal(loadConfig({ TEST_CLOCK_SKEW_MS: '-5000' }, process.cwd(), 2).TEST_CLOCK_SKEW_MS, -5000);
  t.throws(() => loadConfig({ TEST_CLOCK_SKEW_MS: '5s' }, process.cwd(), 2), /TEST_CLOCK_SKEW_MS must be an integer/);
});
