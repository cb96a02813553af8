// The surface of src/cluster/: what the other folders of src/ may import from it.

export { announceListening } from './announce.ts';
export { Cluster } from './cluster.ts';
export { startEngine } from './engine-host.ts';
export type { EngineHost } from './engine-host.ts';
export type { FromWorker, ToWorker, WorkerData } from './protocol.ts';
export { probePort } from './listen-port.ts';
export { ProcessControl } from './process-control.ts';
export { relayInference } from './relay.ts';
export { RemoteInference } from './remote-inference.ts';
export { createReadinessBoard, publishReadiness } from './shared-readiness.ts';
export { tuneGc } from './tune-gc.ts';
