export { prepareRequest, metadataText, type PreparedRequest } from './prepare.ts';
export { earlyMetadata } from './early-metadata.ts';
export { verify } from './verify.ts';
export { EarlyInference, EARLY_INFERENCE_TOKENS } from './early-inference.ts';
export { ANSWERS } from './outcomes.ts';
export { storeMetering, type Metering } from './metering.ts';
export { ClientGoneError } from './ports.ts';
export type { Admission, AdmissionRefusal, VerifyAnswer, VerifyDeps, VerifyRequest } from './ports.ts';

export type { ReceivedPart } from './ports.ts';
