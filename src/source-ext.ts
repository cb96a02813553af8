/** `.js` when this build runs compiled (npm start, from dist/), `.ts` when it runs through tsx
 * (tests, development). Files that name another module at run time (a worker thread's entry,
 * the inference pool's worker) pick the extension with this, since tsc rewrites only import
 * specifiers, not URLs built from strings. */
export const SOURCE_EXT: '.js' | '.ts' = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** The folder of this module: src/ under tsx, dist/src/ compiled. Compiled, every thread runs
 * a bundle (dist/src/*.bundle.mjs, scripts/bundle.mjs) that lies in this same folder, so files
 * found at run time relative to it resolve alike in every form the code runs in. */
export const SOURCE_DIR: URL = new URL('.', import.meta.url);

/** A thread's entry file: compiled, the bundle scripts/bundle.mjs wrote beside this module
 * (`bundle`, one of BUNDLES in scripts/build-stamp.mjs); under tsx, its source (`source`,
 * relative to src/). One rule for every thread the service starts, found from this folder
 * rather than from the caller's, because compiled the caller runs inside a bundle. */
export function threadEntry(bundle: string, source: string): URL {
  return new URL(SOURCE_EXT === '.js' ? bundle : source, SOURCE_DIR);
}
