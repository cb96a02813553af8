// Public surface of the client package export ("./client"): the reference crop, the request
// builder and the verify client.

export { eyeCrop320, cropSamplePoint, type SourceImage, type EyePair } from './crop.ts';
export {
  buildCapture, buildBatch, sha256Hex,
  type CaptureInput, type FrameInput, type ImageInput, type BuiltRequest,
} from './builder.ts';
export { buildVerifyBody, type VerifyBody } from './multipart.ts';
export {
  createVerifyClient, isRetryable, parseRetryAfter, backoffDelay,
  type VerifyClient, type VerifyClientOptions, type VerifyCallOptions, type VerifyOutcome,
  type VerifyCompleted, type VerifyFailed, type CaptureVerdict, type Verdict, type VerifyResponse, type UsageRecord,
} from './verify-client.ts';
export { encodePng } from '../images/png-encode.ts';
export type {
  CapturePacket, BatchEnvelope, FrameRecord, ImageDescriptor, ModuleId, Mode, Phase, ValidationIssue,
} from '../packets/types.ts';
