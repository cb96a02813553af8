/** `.js` when this build runs compiled (npm start, from dist/), `.ts` when it runs through tsx
 * (tests, development). Files that name another module at run time (a worker thread's entry,
 * the inference pool's worker) pick the extension with this, since tsc rewrites only import
 * specifiers, not URLs built from strings. */
export const SOURCE_EXT: '.js' | '.ts' = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** The folder of this module: src/ under tsx, dist/src/ compiled. The API worker's bundle
 * (dist/src/worker.bundle.mjs, scripts/bundle-worker.mjs) lies in the same folder, so files
 * found at run time relative to it resolve alike in every form the code runs in. */
export const SOURCE_DIR: URL = new URL('.', import.meta.url);
