/** A command used wrongly or naming something unknown: one line on stderr, exit 1, no stack.
 * In a file of its own so that command modules can throw it without importing main.ts. */
export class UsageError extends Error {
  override name = 'UsageError';
}
