// Shapes of the capture packet as the spec defines them: the types that flow from validation
// to inference. The packet's own types are the TypeBox schemas' Static<> types.

import type { Static } from '@sinclair/typebox';
import type { ImageEncoding, Mode, Phase } from '../contract/index.ts';
import type { BatchEnvelopeSchema, CapturePacketSchema, FrameSchema, ImageDescriptorSchema } from './schemas.ts';


/** The module table of interface-spec.md: each mode's capture_profile. */
export const CAPTURE_PROFILE: Record<Mode, string> = {
  rgb_single: 'rgb_single_v1',
  rgb_sequence: 'rgb_contiguous_v1',
  color: 'color_wrgb_v1',
};

export const PHASES: readonly Phase[] = ['white', 'red', 'green', 'blue'];

// The packet types are derived from the TypeBox schemas (schemas.ts), so the shape that is
// validated and the shape the code reads cannot drift apart.
export type ImageDescriptor = Static<typeof ImageDescriptorSchema>;
export type FrameRecord = Static<typeof FrameSchema>;
export type CapturePacket = Static<typeof CapturePacketSchema>;
export type BatchEnvelope = Static<typeof BatchEnvelopeSchema>;

/** One validated capture ready for inference: `pixels[i]` is the decoded 320x320 RGB
 * (HWC, 307200 bytes: its own ArrayBuffer, so it can be transferred, or a view of the
 * frame-slab slot its part arrived in, shared with the inference threads) of frame i,
 * or null for a frame without image. */
export interface PreparedCapture {
  packet: CapturePacket;
  pixels: (Uint8Array | null)[];
}


/** An image the metadata references: which multipart file part holds it, what its bytes must
 * hash to, and where its descriptor sits (`loc` points at the frame's `image`). */
export interface ImageRef {
  part: string;
  encoding: ImageEncoding;
  sha256: string;
  captureIndex: number;
  frameIndex: number;
  loc: (string | number)[];
}

/** The metadata field after every packet rule passed. `batch` says whether the client sent
 * the envelope form; `captures` is in input order either way. */
export interface ParsedMetadata {
  captures: CapturePacket[];
  batch: boolean;
  images: ImageRef[];
  /** the metadata field as sent (kept for the demo archive) */
  text: string;
}

/** What the multipart stream reports about each part other than `metadata`. */
export interface UploadedPart {
  name: string;
  filename: string | null;
  size: number;
  /** lowercase hex SHA-256 of the streamed bytes */
  sha256: string;
}
