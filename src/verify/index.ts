export { prepareRequest, metadataText, type PreparedRequest } from './prepare.ts';
export { earlyMetadata } from './early-metadata.ts';
export { verify, respond, type CallTrace } from './verify.ts';
export { storeMetering, type Metering } from './metering.ts';
export type { Admission, AdmissionRefusal, VerifyAnswer, VerifyDeps, VerifyRequest } from './ports.ts';
