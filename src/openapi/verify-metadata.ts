import { Type, type TSchema } from '@sinclair/typebox';
import { MAX_CAPTURES_PER_REQUEST, MAX_EVENTS_COLOR, MAX_EVENTS_PER_CAPTURE, MAX_EVENTS_RGB_SINGLE, type Mode, type ModuleId } from '../contract/index.ts';
import { CAPTURE_PROFILE, MODULE_MODES } from '../packets/index.ts';

// The verify metadata as the document describes it per module (issue 29). The service
// validates with one CapturePacket schema and ties mode to module, profile to mode and the
// event count to mode in rules.ts, which a schema generator cannot see: it drew `color`
// captures for rgb_liveness. Here each mode gets its own packet (mode and capture_profile
// fixed, frames bounded as rules.ts bounds them, over the CapturePacket the service validates
// with), and each module a metadata schema of its modes only, marked with `x-module-id` (OpenAPI cannot tie a body schema to a path
// parameter, so the tie is named where tools and readers can find it). The schemas are
// derived from the service's own, so they cannot drift from it.

const MAX_EVENTS: Record<Mode, number> = {
  rgb_single: MAX_EVENTS_RGB_SINGLE,
  rgb_sequence: MAX_EVENTS_PER_CAPTURE,
  color: MAX_EVENTS_COLOR,
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** CapturePacket narrowed to one mode: its mode, its profile and its event bound. */
function packetOf(mode: Mode): TSchema {
  return Type.Unsafe({
    description: `One ${mode} capture: a CapturePacket with mode ${mode}.`,
    allOf: [ref('CapturePacket')],
    properties: {
      mode: { const: mode, type: 'string' },
      capture_profile: { const: CAPTURE_PROFILE[mode], type: 'string', description: `The profile of mode ${mode}.` },
      frames: { maxItems: MAX_EVENTS[mode] },
    },
  });
}

const PACKET_NAMES: Record<Mode, string> = { rgb_single: 'CapturePacketRgbSingle', rgb_sequence: 'CapturePacketRgbSequence', color: 'CapturePacketColor' };
export const PACKETS: Record<Mode, TSchema> = { rgb_single: packetOf('rgb_single'), rgb_sequence: packetOf('rgb_sequence'), color: packetOf('color') };

/** The metadata a request to `moduleId` may carry: one capture of its modes, or a batch of them. */
function metadataOf(moduleId: ModuleId): TSchema {
  const packets = MODULE_MODES[moduleId].map((m) => ref(PACKET_NAMES[m]));
  const packet = packets.length === 1 ? packets[0]! : { anyOf: packets };
  return Type.Unsafe({
    'x-module-id': moduleId,
    description: `The metadata of POST /v1/modules/${moduleId}/verify: one capture of mode ${MODULE_MODES[moduleId].join(' or ')}, or a batch envelope of them.`,
    anyOf: [packet, { allOf: [ref('BatchEnvelope')], properties: { captures: { items: packet, maxItems: MAX_CAPTURES_PER_REQUEST } } }],
  });
}

export const MODULE_METADATA: Record<ModuleId, TSchema> = { rgb_liveness: metadataOf('rgb_liveness'), color_liveness: metadataOf('color_liveness') };
