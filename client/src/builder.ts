// Builds the metadata of a verify request from frames and their encoded crops: the protocol
// constants, the capture_profile that belongs to the mode, part names and the sha256 of every
// image, so that a client cannot get those wrong by hand.

import { randomId, sha256Hex } from './digest.ts';
import { CAPTURE_PROFILE, PREPROCESS_PROFILE } from './wire.ts';
import type { BatchEnvelope, CapturePacket, FrameRecord, FrameStatus, ImageEncoding, Mode, OkFrameRecord, Phase, Point } from './wire.ts';

export interface ImageInput {
  /** the exact bytes that will be uploaded: a PNG file or 307200 rgb8 bytes */
  bytes: Uint8Array;
  /** default: 'png' when the bytes start with the PNG signature, else 'rgb8' */
  encoding?: ImageEncoding;
  /** default: `f<frame index>`, prefixed per capture in a batch */
  part?: string;
}

interface FrameInputBase {
  /** default: the frame's position in `frames` */
  source_index?: number;
  timestamp_us: number;
  /** colour mode only */
  phase?: Phase;
  /** colour mode only */
  display_time_us?: number;
}

/** A frame with a face: the service requires source_size, eyes_xy and the image for every
 * `ok` frame (422 otherwise), so the type does too. */
export interface OkFrameInput extends FrameInputBase {
  /** default 'ok' */
  status?: 'ok';
  source_size: [number, number];
  eyes_xy: [Point, Point];
  image: ImageInput;
}

/** A failure event (no face, lost frame). The service refuses image data on an event (422
 * field_forbidden); the type leaves those fields open so that code which turns a frame into an
 * event by spreading it still compiles, and the service says what is wrong. */
export interface EventFrameInput extends FrameInputBase {
  status: Exclude<FrameStatus, 'ok'>;
  source_size?: [number, number];
  eyes_xy?: [Point, Point];
  image?: ImageInput;
}

export type FrameInput = OkFrameInput | EventFrameInput;

export interface CaptureInput {
  /** default: a random UUID (a new capture uses a new id) */
  capture_id?: string;
  mode: Mode;
  /** default true */
  complete?: boolean;
  frames: FrameInput[];
}

export interface BuiltRequest<M> {
  metadata: M;
  /** part name -> bytes, ready for encodeMultipart or the verify client */
  files: Map<string, Uint8Array>;
}

/** A synchronous SHA-256 (lowercase hex), for callers that have one (node:crypto). */
export type SyncDigest = (bytes: Uint8Array) => string;

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** PNG files start with the 8-byte signature \x89PNG\r\n\x1a\n, all eight checked: an rgb8
 * crop whose first pixel and a half read 89 50 4E 47 was sent as PNG and refused 422. */
export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && PNG_SIGNATURE.every((b, i) => bytes[i] === b);
}

/** One capture; every image hashed with Web Crypto. */
export async function buildCapture(input: CaptureInput, options: { partPrefix?: string } = {}): Promise<BuiltRequest<CapturePacket>> {
  return buildCaptureWith(input, await digestsOf([input]), options);
}

/** Several captures in one envelope; default part names are prefixed `c<k>.` per capture so
 * they stay unique across the request. */
export async function buildBatch(inputs: CaptureInput[]): Promise<BuiltRequest<BatchEnvelope>> {
  return buildBatchWith(inputs, await digestsOf(inputs));
}

// Web Crypto only hashes asynchronously; the hashes are taken first so that the assembly
// below stays one synchronous function shared with the SyncDigest variants.
async function digestsOf(inputs: CaptureInput[]): Promise<SyncDigest> {
  const digests = new Map<Uint8Array, string>();
  const images = inputs.flatMap((c) => c.frames.flatMap((f) => (f.image ? [f.image.bytes] : [])));
  await Promise.all(images.map(async (bytes) => {
    if (!digests.has(bytes)) digests.set(bytes, await sha256Hex(bytes));
  }));
  return (bytes) => digests.get(bytes)!;
}

/** buildCapture with a synchronous hash function supplied by the caller. */
export function buildCaptureWith(input: CaptureInput, digest: SyncDigest, options: { partPrefix?: string } = {}): BuiltRequest<CapturePacket> {
  const files = new Map<string, Uint8Array>();
  const frames = input.frames.map((f, i): FrameRecord => {
    // Assembled loosely and typed at the end: a JavaScript caller (or a test of the service's
    // 422s) may pass a frame the types rule out, and the service, not the builder, judges it.
    const loose: FrameInput = f;
    const frame: Omit<Partial<OkFrameRecord>, 'status'> & Pick<FrameRecord, 'source_index' | 'timestamp_us' | 'status'> = {
      source_index: loose.source_index ?? i,
      timestamp_us: loose.timestamp_us,
      status: loose.status ?? 'ok',
    };
    if (f.source_size !== undefined) frame.source_size = [f.source_size[0], f.source_size[1]];
    if (f.eyes_xy !== undefined) frame.eyes_xy = [[f.eyes_xy[0][0], f.eyes_xy[0][1]], [f.eyes_xy[1][0], f.eyes_xy[1][1]]];
    if (f.image !== undefined) {
      const part = f.image.part ?? `${options.partPrefix ?? ''}f${i}`;
      if (files.has(part)) throw new RangeError(`buildCapture: part name '${part}' is used twice`);
      files.set(part, f.image.bytes);
      frame.image = {
        part,
        encoding: f.image.encoding ?? (isPng(f.image.bytes) ? 'png' : 'rgb8'),
        sha256: digest(f.image.bytes),
      };
    }
    if (f.phase !== undefined) frame.phase = f.phase;
    if (f.display_time_us !== undefined) frame.display_time_us = f.display_time_us;
    return frame as FrameRecord;
  });
  const metadata: CapturePacket = {
    protocol_version: 1,
    capture_id: input.capture_id ?? randomId(),
    mode: input.mode,
    capture_profile: CAPTURE_PROFILE[input.mode],
    preprocess_profile: PREPROCESS_PROFILE,
    complete: input.complete ?? true,
    frames,
  };
  return { metadata, files };
}

/** buildBatch with a synchronous hash function supplied by the caller. */
export function buildBatchWith(inputs: CaptureInput[], digest: SyncDigest): BuiltRequest<BatchEnvelope> {
  const files = new Map<string, Uint8Array>();
  const captures = inputs.map((input, k) => {
    const built = buildCaptureWith(input, digest, { partPrefix: `c${k}.` });
    for (const [part, bytes] of built.files) {
      if (files.has(part)) throw new RangeError(`buildBatch: part name '${part}' is used twice`);
      files.set(part, bytes);
    }
    return built.metadata;
  });
  return { metadata: { captures }, files };
}
