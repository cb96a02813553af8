import { Type, type TSchema } from '@sinclair/typebox';
import { MAX_CAPTURES_PER_REQUEST, MAX_EVENTS_COLOR, MAX_EVENTS_PER_CAPTURE, MAX_EVENTS_RGB_SINGLE } from '../contract/index.ts';
import { CapturePacketSchema } from '../packets/schemas.ts';
import { CAPTURE_PROFILE, MODULE_MODES } from '../packets/rules.ts';
import type { Mode, ModuleId } from '../packets/types.ts';

// The verify metadata as the document describes it per module (issue 29). The service
// validates with one CapturePacket schema and ties mode to module, profile to mode and the
// event count to mode in rules.ts, which a schema generator cannot see: it drew `color`
// captures for rgb_liveness. Here each mode gets its own packet (mode and capture_profile
// fixed, frames bounded as rules.ts bounds them), and each module a metadata schema of its
// modes only, marked with `x-module-id` (OpenAPI cannot tie a body schema to a path
// parameter, so the tie is named where tools and readers can find it). The schemas are
// derived from the service's own, so they cannot drift from it.

const MAX_EVENTS: Record<Mode, number> = {
  rgb_single: MAX_EVENTS_RGB_SINGLE,
  rgb_sequence: MAX_EVENTS_PER_CAPTURE,
  color: MAX_EVENTS_COLOR,
};

/** CapturePacket with one mode: its mode, its profile and its event bound. */
function packetOf(mode: Mode): TSchema {
  const plain = JSON.parse(JSON.stringify(CapturePacketSchema)) as { properties: Record<string, object>; description?: string };
  plain.properties.mode = { const: mode, type: 'string' };
  plain.properties.capture_profile = { const: CAPTURE_PROFILE[mode], type: 'string', description: `The profile of mode ${mode}.` };
  plain.properties.frames = { ...plain.properties.frames, maxItems: MAX_EVENTS[mode] };
  plain.description = `One ${mode} capture.`;
  return Type.Unsafe(plain);
}

export const PACKETS: Record<Mode, TSchema> = { rgb_single: packetOf('rgb_single'), rgb_sequence: packetOf('rgb_sequence'), color: packetOf('color') };

/** The metadata a request to `moduleId` may carry: one capture of its modes, or a batch of them. */
function metadataOf(moduleId: ModuleId): TSchema {
  const packets = MODULE_MODES[moduleId].map((m) => PACKETS[m]);
  const packet = packets.length === 1 ? packets[0]! : Type.Union(packets);
  return Type.Unsafe({
    'x-module-id': moduleId,
    description: `The metadata of POST /v1/modules/${moduleId}/verify: one capture of mode ${MODULE_MODES[moduleId].join(' or ')}, or a batch envelope of them.`,
    anyOf: [
      packet,
      Type.Object({ captures: Type.Array(packet, { maxItems: MAX_CAPTURES_PER_REQUEST }) }, { additionalProperties: false }),
    ],
  });
}

export const MODULE_METADATA: Record<ModuleId, TSchema> = { rgb_liveness: metadataOf('rgb_liveness'), color_liveness: metadataOf('color_liveness') };
