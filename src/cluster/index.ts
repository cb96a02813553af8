// The surface of src/cluster/: what the other folders of src/ may import from it.

export { startEngine } from './engine-host.ts';
export type { EngineHost } from './engine-host.ts';
export type { FromWorker, ToWorker, WorkerData } from './messages.ts';
export { relayInference } from './relay.ts';
export { RemoteInference } from './remote-inference.ts';
