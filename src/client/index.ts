// The client package (client/, published as @liveness-service/client) seen from inside this
// repository, for Node code and tests run with tsx: everything the package exports, with
// synchronous builders on node:crypto under the names the service's tests have always used.
// The package itself hashes with Web Crypto, which is asynchronous only; test fixtures build
// hundreds of requests inline, where a synchronous hash keeps them plain expressions.

import { createHash } from 'node:crypto';
import {
  buildBatchWith, buildCaptureWith, encodeMultipart,
  type BatchEnvelope, type BuiltRequest, type CaptureInput, type CapturePacket,
} from '../../client/src/index.ts';

export {
  eyeCrop320, cropSamplePoint, isPng, encodeMultipart, toFormData, buildCaptureWith, buildBatchWith,
  createVerifyClient, isRetryable, parseRetryAfter, backoffDelay, createSession, getSession, revokeSession,
  CAPTURE_PROFILE, ERROR_STATUS, LIMITS, MODULE_IDS, RGB8_BYTES,
} from '../../client/src/index.ts';
export type {
  SourceImage, EyePair, CaptureInput, FrameInput, ImageInput, BuiltRequest, SyncDigest, MultipartBody,
  VerifyClient, VerifyClientOptions, VerifyCallOptions, VerifyOutcome, VerifyCompleted, VerifyFailed,
  CaptureVerdict, Verdict, VerifyResponse, UsageRecord, ResultRecord, ErrorCode, ReadOutcome, MeResponse, ModulesResponse,
  CapturePacket, BatchEnvelope, FrameRecord, ImageDescriptor, ModuleId, Mode, Phase, ValidationIssue,
  SessionClientOptions, SessionRequest, SessionCreated, SessionStatus, SessionVerification, SessionState, SessionMeResponse,
} from '../../client/src/index.ts';
export { encodePng } from '../images/index.ts';

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function buildCapture(input: CaptureInput, options: { partPrefix?: string } = {}): BuiltRequest<CapturePacket> {
  return buildCaptureWith(input, sha256Hex, options);
}

export function buildBatch(inputs: CaptureInput[]): BuiltRequest<BatchEnvelope> {
  return buildBatchWith(inputs, sha256Hex);
}

/** encodeMultipart with the body as a Buffer, as Node callers (http.request, tests) take it. */
export function buildVerifyBody(metadata: CapturePacket | BatchEnvelope | string, files: ReadonlyMap<string, Uint8Array>): { body: Buffer; contentType: string } {
  const { body, contentType } = encodeMultipart(metadata, files);
  return { body: Buffer.from(body.buffer, body.byteOffset, body.byteLength), contentType };
}
