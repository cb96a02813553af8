// Public surface of the client package: the reference crop, the request builder, the
// multipart encoder and the verify client, plus the wire types and constants.

export { eyeCrop320, cropSamplePoint, type SourceImage, type EyePair } from './crop.ts';
export {
  buildCapture, buildBatch, buildCaptureWith, buildBatchWith, isPng,
  type CaptureInput, type FrameInput, type OkFrameInput, type EventFrameInput, type ImageInput, type BuiltRequest, type SyncDigest,
} from './builder.ts';
export { sha256Hex } from './digest.ts';
export { encodeMultipart, toFormData, type MultipartBody } from './multipart.ts';
export {
  createVerifyClient, isRetryable, backoffDelay,
  type VerifyClient, type VerifyClientOptions, type VerifyCallOptions, type VerifyOutcome,
  type VerifyCompleted, type VerifyFailed, type CaptureVerdict, type Verdict,
} from './verify-client.ts';
export { parseRetryAfter, type ReadOutcome } from './request.ts';
export { createSession, getSession, revokeSession, type SessionClientOptions, type SessionRequest } from './sessions.ts';
export * from './wire.ts';
