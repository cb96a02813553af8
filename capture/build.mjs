// Builds the capture component for browsers into one folder an integrator serves from its own
// origin: capture.js (the component, small), a chunk with the landmark engine that capture.js
// imports only when a capture starts, models/ (the two face-api models it uses) and wasm/
// (TensorFlow.js's WASM backend). Nothing is fetched from anywhere else at run time.
//   node capture/build.mjs [outDir]      (default capture/dist)
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** The model and WASM files the engine loads, as [source path, path under the output folder]. */
export function assetFiles() {
  const faceApi = path.dirname(require.resolve('@vladmandic/face-api/package.json'));
  const wasm = path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist');
  const models = ['tiny_face_detector_model', 'face_landmark_68_model', 'face_landmark_68_tiny_model'].flatMap((m) => [
    [path.join(faceApi, 'model', `${m}-weights_manifest.json`), `models/${m}-weights_manifest.json`],
    [path.join(faceApi, 'model', `${m}.bin`), `models/${m}.bin`],
  ]);
  // the engine runs single-threaded (no cross-origin isolation needed): plain and SIMD builds
  const wasmFiles = ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm'].map((f) => [path.join(wasm, f), `wasm/${f}`]);
  return [...models, ...wasmFiles];
}

/** Bundles the component; returns { files: Map<relative path, Buffer> } without writing. */
export async function buildCapture({ minify = true } = {}) {
  const out = await esbuild.build({
    entryPoints: { capture: path.join(HERE, 'src/index.ts') },
    bundle: true, splitting: true, format: 'esm', platform: 'browser', target: 'es2022',
    outdir: '/out', write: false, minify, chunkNames: 'chunks/[name]-[hash]', legalComments: 'linked',
    logLevel: 'silent',
  });
  const files = new Map();
  for (const f of out.outputFiles) files.set(path.relative('/out', f.path), Buffer.from(f.contents));
  for (const [src, rel] of assetFiles()) files.set(rel, fs.readFileSync(src));
  return { files };
}

export async function writeCapture(outDir) {
  const { files } = await buildCapture();
  fs.rmSync(outDir, { recursive: true, force: true });
  for (const [rel, bytes] of files) {
    fs.mkdirSync(path.dirname(path.join(outDir, rel)), { recursive: true });
    fs.writeFileSync(path.join(outDir, rel), bytes);
  }
  return files;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const outDir = path.resolve(process.argv[2] ?? path.join(HERE, 'dist'));
  const files = await writeCapture(outDir);
  let total = 0;
  for (const [rel, bytes] of files) {
    total += bytes.length;
    console.log(`${String(bytes.length).padStart(9)}  ${rel}`);
  }
  console.log(`${String(total).padStart(9)}  total in ${outDir}`);
}
