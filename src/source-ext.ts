/** `.js` when this build runs compiled (npm start, from dist/), `.ts` when it runs through tsx
 * (tests, development). Files that name another module at run time (a worker thread's entry,
 * the inference pool's worker) pick the extension with this, since tsc rewrites only import
 * specifiers, not URLs built from strings. */
export const SOURCE_EXT: '.js' | '.ts' = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
