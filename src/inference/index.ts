// The inference concern's public surface: the engine the server runs in its main
// thread, the manifest loader and the operator's model check.
export { createInferenceEngine, type Backend, type EngineOptions, type InferenceEngine } from './engine.ts';
export { loadManifest, ManifestError, MANIFEST_FORMAT, type Manifest } from './manifest.ts';
export { checkModelSet } from './check.ts';
export { poolShape } from './pool.ts';
export type * from './types.ts';
