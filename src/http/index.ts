// The surface of src/http/: what the other folders of src/ may import from it.

export { createApp } from './app.ts';
export { ConnectionBalance, createBalanceTable } from './balance.ts';
export { HostAdmission, createAdmissionTable, releaseWorkerSlots } from './capacity.ts';
export { compileTrust } from './client-address.ts';
export { composeApiWorker } from './compose.ts';
export type { ApiWorker, ApiWorkerParts } from './compose.ts';
export { ConnectionCap } from './connections.ts';
export { createCors } from './cors.ts';
export { buildRouter } from './routes/index.ts';
export { testFaultHook } from './test-faults.ts';
export { HSTS, appModule, checkTls, servesTls } from './tls.ts';
export { UploadPacer } from './upload-pace.ts';
export { LISTEN_EXCLUSIVE, LISTEN_SHARED, NativeBindingError, closeApp, describeUwsBuild, listen, loadUws, uwsBuild } from './uws.ts';
export type { UwsModule, us_listen_socket } from './uws.ts';
