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

let engineBuild: URL | null = null;

/**
 * Tests only: a process that runs the sources through tsx (a test file) starts the inference
 * pool's and `auto`'s measurement threads from their compiled bundles in `dir` (dist/src/), or
 * from the sources again when `dir` is null (the default). bench/harness/from-build.ts calls it
 * when dist/ matches the sources (scripts/build-stamp.mjs), the rule by which the tests start servers
 * from the build: each such thread otherwise loads tsx and compiles some sixty source modules
 * of its own, ~0.5-1 CPU-s per engine start, and the suite starts about a hundred (issue 43).
 * Those threads share no module state with the thread that starts them (they talk by messages
 * only), so a bundle of the same sources behaves alike; threads that do share some (the
 * tracing SDK, imported into the calling thread) keep threadEntry.
 */
export function startEngineThreadsFromBuild(dir: URL | null): void {
  engineBuild = dir;
}

/** threadEntry for the engine's threads (the pool's, the backend measurement's): read when a
 * thread starts, so that startEngineThreadsFromBuild applies to engines started after it. */
export function engineThreadEntry(bundle: string, source: string): URL {
  return SOURCE_EXT === '.ts' && engineBuild ? new URL(bundle, engineBuild) : threadEntry(bundle, source);
}

/** The engine threads' node arguments: from the build (startEngineThreadsFromBuild), this
 * process's module hooks and source-map setting without its tsx import, which a bundle does not
 * need (~0.25 CPU-s a thread), nor tap's; otherwise undefined, the thread inheriting them. (A
 * Worker refuses V8 flags in execArgv, and they are the process's anyway.) */
export function engineThreadExecArgv(): string[] | undefined {
  if (!(SOURCE_EXT === '.ts' && engineBuild)) return undefined;
  const tsx = /^tsx(\/.*)?$/;
  const hook = /^--(import|require|loader|experimental-loader)$/;
  const args = process.execArgv;
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const [flag, value] = args[i]!.split(/=(.*)/s);
    if (flag === '--enable-source-maps') kept.push(args[i]!);
    if (!hook.test(flag!)) continue;
    const module = value ?? args[++i];
    // tap's @tapjs/processinfo records the files a test loads (coverage, `tap --changed`): a
    // bundle would only send its modules through that loader thread too (the harness keeps it
    // out of the servers and CLI runs a test starts for the same reason: bench/harness/server.ts)
    if (module !== undefined && !tsx.test(module) && !module.includes('/@tapjs/')) kept.push(`${flag}=${module}`);
  }
  return kept;
}
