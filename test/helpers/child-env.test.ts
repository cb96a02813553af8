import t from 'tap';
import { childEnv } from './server.ts';

// The processes the tests start run without tap's instrumentation (bench/harness/server.ts
// says why), and with any other NODE_OPTIONS a developer set.
t.test('childEnv takes tap\'s entries out of NODE_OPTIONS and keeps the rest', async (t) => {
  const tap = '--import=file:///w/node_modules/@tapjs/processinfo/dist/esm/import.mjs';
  t.same(childEnv({ NODE_OPTIONS: `--max-old-space-size=512 ${tap}  --trace-warnings`, X: '1' }), { NODE_OPTIONS: '--max-old-space-size=512 --trace-warnings', X: '1' });
  t.same(childEnv({ NODE_OPTIONS: tap, X: '1' }), { X: '1' }, 'nothing left: no NODE_OPTIONS at all');
  t.same(childEnv({ X: '1' }), { X: '1' });
  const env = { NODE_OPTIONS: tap };
  childEnv(env);
  t.equal(env.NODE_OPTIONS, tap, 'the given environment is not changed');
});

t.test('under tap, this process has the instrumentation and its children do not', async (t) => {
  t.match(process.env.NODE_OPTIONS ?? '', /@tapjs\//, 'tap put it in NODE_OPTIONS (else this test proves nothing)');
  t.notMatch(childEnv().NODE_OPTIONS ?? '', /@tapjs\//);
});
