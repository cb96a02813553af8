// The CLI's exit codes (docs/cli.md) tell a script what kind of refusal it met. A store that
// stops answering mid-command (PostgreSQL gone after the store opened) is 5, like one that
// cannot be opened: before, it was an unexpected error (exit 1 with a stack).

import t from 'tap';
import { ConfigError } from '../../src/config/index.ts';
import { ConflictError, EXIT, exitCodeOf, NotFoundError, UsageError } from '../../src/cli/errors.ts';
import { StoreError, StoreUnavailableError } from '../../src/store/index.ts';

t.test('each refusal has its exit code; anything else is unexpected', async (t) => {
  t.equal(exitCodeOf(new NotFoundError('no such token')), EXIT.not_found);
  t.equal(exitCodeOf(new ConflictError('name taken')), EXIT.conflict);
  t.equal(exitCodeOf(new StoreError('cannot open')), EXIT.store_unavailable);
  t.equal(exitCodeOf(new StoreUnavailableError('store unavailable: Connection terminated', new Error('Connection terminated'))), EXIT.store_unavailable);
  t.equal(exitCodeOf(new UsageError('bad flag')), EXIT.usage);
  t.equal(exitCodeOf(new ConfigError('PORT must be a number')), EXIT.usage);
  t.equal(exitCodeOf(Object.assign(new TypeError('Unknown option'), { code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' })), EXIT.usage);
  t.equal(exitCodeOf(new Error('boom')), null);
  t.equal(exitCodeOf(undefined), null);
});
