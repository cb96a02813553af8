// Shapes of the capture packet as the spec defines them. These are the types that
// flow from validation to inference; the TypeBox schemas in this folder must agree.

import type { FrameStatus, ImageEncoding, Mode, Phase, Point } from '../contract/index.ts';

export { CROP_SIZE, MODULE_IDS, RGB8_BYTES } from '../contract/index.ts';
export type { FrameStatus, ImageEncoding, Mode, ModuleId, Phase, Point, ValidationIssue } from '../contract/index.ts';

/** The module table of interface-spec.md: each mode's capture_profile. */
export const CAPTURE_PROFILE: Record<Mode, string> = {
  rgb_single: 'rgb_single_v1',
  rgb_sequence: 'rgb_contiguous_v1',
  color: 'color_wrgb_v1',
};

export const PHASES: readonly Phase[] = ['white', 'red', 'green', 'blue'];

export interface ImageDescriptor {
  part: string;
  encoding: ImageEncoding;
  sha256: string;
}

export interface FrameRecord {
  source_index: number;
  timestamp_us: number;
  status: FrameStatus;
  source_size?: [number, number];
  eyes_xy?: [Point, Point];
  image?: ImageDescriptor;
  phase?: Phase;
  display_time_us?: number;
}

export interface CapturePacket {
  protocol_version: 1;
  capture_id: string;
  mode: Mode;
  capture_profile: string;
  preprocess_profile: string;
  complete: boolean;
  frames: FrameRecord[];
}

export interface BatchEnvelope {
  captures: CapturePacket[];
}

/** One validated capture ready for inference: `pixels[i]` is the decoded 320x320 RGB
 * (HWC, 307200 bytes, its own ArrayBuffer so it can be transferred) of frame i,
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
