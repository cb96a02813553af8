import t from 'tap';
import { testingSettings } from '../../src/config/index.ts';
import { startServer } from '../helpers/server.ts';

// Security issue 40, finding 10: TEST_PASSWORD_SCRYPT_N (weaker password hashing) and
// TEST_WORKER_FAULTS (a header crashes a handler) were read by production builds with no word
// at start. Every TEST_* variable and CLOCK_FILE set now draws a warning at start.

t.test('which settings count as testing-only', async (t) => {
  t.same(testingSettings({ HOST: '0.0.0.0', PORT: '80', NODE_ENV: 'production' }), [], 'none: nothing to say');
  t.same(testingSettings({ TEST_WORKER_FAULTS: '1', TEST_PASSWORD_SCRYPT_N: '1024', CLOCK_FILE: '/tmp/c', TEST_SOMETHING_NEW: 'x', TEST_EMPTY: '' }), ['CLOCK_FILE', 'TEST_PASSWORD_SCRYPT_N', 'TEST_SOMETHING_NEW', 'TEST_WORKER_FAULTS'], 'every TEST_* and CLOCK_FILE set, an unknown one included; empty ones are unset');
});

t.test('through the real server: a start with testing settings warns, naming each one', async (t) => {
  const server = await startServer({ env: { TEST_WORKER_FAULTS: '1', TEST_PASSWORD_SCRYPT_N: '1024' } });
  t.teardown(() => server.stop());
  const warning = server.logLines().find((l) => /^TESTING ONLY settings are set/.test(l.msg ?? ''));
  t.ok(warning, 'the start-up log warns');
  t.equal(warning?.level, 40, 'at level warn');
  t.ok(warning?.testing_settings.includes('TEST_WORKER_FAULTS') && warning?.testing_settings.includes('TEST_PASSWORD_SCRYPT_N'), 'naming both');
  t.match(warning?.msg, /never set them in production/);
});
