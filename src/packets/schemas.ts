// TypeBox schemas of the verify metadata (interface-spec.md "CapturePacket", "Frame record",
// "Image descriptor", "Batch envelope"). They say what JSON Schema can say; rules that tie
// fields together (status, mode, order, uniqueness, module) live in rules.ts. They stay plain
// JSON Schema (no Transform, no Date) because the OpenAPI document is generated from them.

import { Type } from '@sinclair/typebox';
import { CAPTURE_ID_MAX_CHARS } from '../contract/index.ts';

// Beyond 2^53 JSON numbers lose precision, so "strictly increasing" could no longer be decided.
const SAFE_MAX = Number.MAX_SAFE_INTEGER;

const NonNegativeInteger = (description: string) =>
  Type.Integer({ minimum: 0, maximum: SAFE_MAX, description });

export const ImageDescriptorSchema = Type.Object(
  {
    part: Type.String({
      minLength: 1,
      description:
        'Multipart form-field name of the file part holding the bytes, matched exactly (file names do not identify parts). Unique within the request; `metadata` is reserved. '
        + 'No double quote, CR or LF, no two backslashes in a row and no backslash at the end (422 part_name_unsendable): standard multipart encoders (browsers, FormData, curl, Python\'s) encode these differently in the part header, so the name would not arrive as written from every client. '
        + 'A single backslash elsewhere is allowed (a Windows-style folder prefix such as C:\\frames\\f0.png): in the part header, `\\\\` is read as one backslash and any other backslash as itself. '
        + 'The part name is sent as UTF-8; one that is not valid UTF-8 is 422 multipart_invalid.',
    }),
    encoding: Type.Union([Type.Literal('png'), Type.Literal('rgb8')], {
      description:
        '`png`: 320x320, 8-bit truecolor RGB (colour type 2), not interlaced. `rgb8`: exactly 307200 bytes of row-major HWC RGB uint8.',
    }),
    sha256: Type.String({
      pattern: '^[0-9a-f]{64}$',
      description: 'Lowercase hexadecimal SHA-256 of the exact uploaded bytes of the part.',
    }),
  },
  { additionalProperties: false, description: 'Where the image bytes of an ok frame are and how they are encoded.' },
);

const PointSchema = Type.Tuple([Type.Number(), Type.Number()], {
  description: '[x, y] in upright source-image pixels; finite.',
});

export const FrameSchema = Type.Object(
  {
    source_index: NonNegativeInteger(
      'Index of the frame in the source stream; strictly increasing within the capture, gaps preserved.',
    ),
    timestamp_us: NonNegativeInteger(
      'Exposure timestamp in microseconds on one capture clock; strictly increasing within the capture.',
    ),
    status: Type.Union([Type.Literal('ok'), Type.Literal('face_unavailable'), Type.Literal('dropped')], {
      description: '`ok` frames carry source_size, eyes_xy and image; failure events carry none of them.',
    }),
    source_size: Type.Optional(
      Type.Tuple(
        [Type.Integer({ minimum: 2, maximum: SAFE_MAX }), Type.Integer({ minimum: 2, maximum: SAFE_MAX })],
        { description: 'Required when status is ok, else forbidden: [width, height] of the upright source image, integers >= 2, the same for every frame of the capture.' },
      ),
    ),
    eyes_xy: Type.Optional(
      Type.Tuple([PointSchema, PointSchema], {
        description:
          'Required when status is ok, else forbidden: [[x0, y0], [x1, y1]] in source-image coordinates (not crop coordinates), each point within [0, width] x [0, height], sorted by x with x1 - x0 >= 2. Each point is the centre of an eye opening (the midpoint of its two corners), not of the iris, so it does not move with the gaze (what the capture component in capture/ sends).',
      }),
    ),
    image: Type.Optional(ImageDescriptorSchema),
    phase: Type.Optional(
      Type.Union([Type.Literal('white'), Type.Literal('red'), Type.Literal('green'), Type.Literal('blue')], {
        description: 'Colour mode only, required there: white, red, green, blue in that order. Forbidden in RGB modes.',
      }),
    ),
    display_time_us: Type.Optional(
      NonNegativeInteger(
        "Colour mode only, optional: when the phase colour was shown, same clock as timestamp_us; not later than this frame's timestamp_us and strictly later than the previous frame's. Forbidden in RGB modes.",
      ),
    ),
  },
  { additionalProperties: false, description: 'One event of a capture: an ok frame with its image, or a failure event.' },
);

export const CapturePacketSchema = Type.Object(
  {
    protocol_version: Type.Literal(1, { description: 'Exactly 1.' }),
    capture_id: Type.String({
      minLength: 1,
      maxLength: CAPTURE_ID_MAX_CHARS,
      // the id is kept with the saved answer, and PostgreSQL text holds no U+0000: a NUL here
      // failed the settlement after the charge (issue 29)
      pattern: '^[^\\u0000]*$',
      description: '1 to 128 characters (Unicode code points), no U+0000 and no lone surrogate (422 string_unicode); unique within the request; a new capture uses a new id.',
    }),
    mode: Type.Union([Type.Literal('rgb_single'), Type.Literal('rgb_sequence'), Type.Literal('color')], {
      description: '`rgb_single` and `rgb_sequence` need module rgb_liveness, `color` needs color_liveness.',
    }),
    capture_profile: Type.Union(
      [Type.Literal('rgb_single_v1'), Type.Literal('rgb_contiguous_v1'), Type.Literal('color_wrgb_v1')],
      { description: 'Must match the mode: rgb_single -> rgb_single_v1, rgb_sequence -> rgb_contiguous_v1, color -> color_wrgb_v1.' },
    ),
    preprocess_profile: Type.Literal('eye_crop_320_v1', { description: 'The crop the client applied; only eye_crop_320_v1.' }),
    complete: Type.Boolean({
      description: 'True only when the agreed capture conditions finished; false yields a normal retry result.',
    }),
    frames: Type.Array(FrameSchema, {
      description:
        'Ordered events: at most 128 per capture and 256 per request (413 beyond), at most 1 for rgb_single and 4 for color (422). Empty only with complete=false.',
    }),
  },
  { additionalProperties: false, description: 'One capture. Unknown fields, labels, thresholds and model parameters are rejected.' },
);

export const BatchEnvelopeSchema = Type.Object(
  {
    captures: Type.Array(CapturePacketSchema, {
      description: 'At most 32 captures (413 beyond), all of the path module; results keep this order.',
    }),
  },
  { additionalProperties: false, description: 'Several captures in one request; `captures` is the only key.' },
);

export const MetadataSchema = Type.Union([CapturePacketSchema, BatchEnvelopeSchema], {
  description:
    'The `metadata` text field: one CapturePacket, or a batch envelope. An object that has a `captures` key is read as an envelope.',
});
