import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { interruptBudget, tuneGc } from '../../src/cluster/index.ts';
import type { Config } from '../../src/config/index.ts';

// The V8 settings the main thread makes before any worker starts (src/cluster/tune-gc.ts).
const config = (WORKERS: number, GC_INITIAL_OLD_SPACE_MB = 0) => ({ WORKERS, GC_INITIAL_OLD_SPACE_MB }) as Config;
const flagsOf = (c: Config, cores: number, execArgv: string[] = []) => {
  const set: string[] = [];
  tuneGc(c, cores, (f) => set.push(f), execArgv);
  return set;
};

t.test('the interrupt budget is doubled only when API workers outnumber the cores, on the V8 it was measured on', async (t) => {
  t.equal(interruptBudget(16, 2, '11.3.244.8-node.33'), 135_168, 'the default on 2 cores: twice V8 11.3\'s 67,584');
  t.equal(interruptBudget(3, 2, '11.3.244.8-node.33'), 135_168);
  t.equal(interruptBudget(2, 2, '11.3.244.8-node.33'), null, 'one API worker per core: V8\'s own');
  t.equal(interruptBudget(1, 4, '11.3.244.8-node.33'), null);
  t.equal(interruptBudget(16, 2, '12.4.254.21-node.33'), null, 'another V8: its own budget, not one measured on 11.3');
});

t.test('tuneGc sets the budget with the other flags, and keeps a budget given on node\'s command line', async (t) => {
  const budget = interruptBudget(16, 2);
  t.same(flagsOf(config(16), 2), ['--expose-gc', ...(budget === null ? [] : [`--interrupt-budget=${budget}`])]);
  t.same(flagsOf(config(2), 2), ['--expose-gc'], 'WORKERS=2 on 2 cores: no budget set');
  t.same(flagsOf(config(16), 2, ['--interrupt-budget=5000']), ['--expose-gc'], 'the operator\'s own budget wins');
  t.same(flagsOf(config(16, 64), 16), ['--initial-old-space-size=64', '--expose-gc']);
});

t.test('V8 accepts the flags tuneGc sets (an unknown flag is only printed, never thrown)', async (t) => {
  const tuneGcUrl = new URL('../../src/cluster/tune-gc.ts', import.meta.url).href;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e',
    `const { tuneGc } = await import(${JSON.stringify(tuneGcUrl)}); tuneGc({ WORKERS: 16, GC_INITIAL_OLD_SPACE_MB: 8 }, 2); console.log('tuned');`],
  { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /tuned/);
  t.notMatch(`${r.stdout}${r.stderr}`, /unrecognized flag/i);
});
