// Type-aware lint (npm run lint, part of npm test). The rules are the ones that catch a
// promise nobody handles: one such promise in an admin route ended the whole process
// (issue 29). A deliberate fire-and-forget is written `void promise` with a comment saying
// why its failure may be dropped or where it is handled.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.image/**', 'src/admin/console/**', 'bench/results/**', 'bench/experiments/**'] },
  {
    files: ['src/**/*.ts', 'workers/**/*.ts', 'bench/**/*.ts', 'bench/**/*.mjs', 'test/**/*.ts', 'capture/src/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      // the plain-JavaScript benches are outside tsconfig.json: linted with the default project,
      // whose file bound (8 by default) they passed with bench/cli-args.mjs, and 16 with
      // bench/png-stages-cpu.mjs (the 17th): 32 leaves room (the lint runs in `npm test`)
      parserOptions: { projectService: { allowDefaultProject: ['bench/*.mjs', 'bench/*/*.mjs'], maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 32 }, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // tap's t.test() returns a PromiseWithSubtest that tap itself awaits (a test file calls it
      // at the top level, and a subtest inside its parent): the one promise a test may leave
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] }],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
);
