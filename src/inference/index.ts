// The inference concern's public surface: the engine the server runs in its main
// thread (behind the model-set switch), the manifest loader, and the operator's model
// check, calibration and live model-set change.
export { createInferenceEngine, type Backend, type EngineOptions, type InferenceEngine } from './engine.ts';
export { loadManifest, ManifestError, MANIFEST_FORMAT, type Manifest } from './manifest.ts';
export { checkModelSet } from './check.ts';
export { ImportError, ImportExistsError, openQuestions, planImport, readGraphFacts, readGraphFile, writeImport, type ImportAnswers } from './import.ts';
export { calibrate, CalibrationError, summary as calibrationSummary, type CalibrationReport } from './calibration/index.ts';
export { createModelSetSwitch, ActivationBusyError, type ModelSetSwitch, type Activation, type ModelSetStatus } from './model-sets.ts';
export { availableModelSets, newActivationRequest, readModelSetState, requestActivation, serveActivationRequests, startupModelSet, waitingRequestId, type ActivationRequest, type ActivationRequests, type ModelSetState } from './model-set-requests.ts';
export type { ReadinessListener } from './readiness-events.ts';
export { poolShape } from './pool.ts';
export type * from './types.ts';

export type { PoolTimes } from './pool.ts';
export { InferenceFailedError } from './types.ts';
