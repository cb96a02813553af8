// Packet rules a schema cannot state: fields tied to status and mode, order, uniqueness, the
// module table, colour phases, eye geometry (interface-spec.md "CapturePacket", "Frame record",
// "Request rules"). They run on the parsed JSON even where the schema already failed, so a
// client sees every problem at once; each rule only looks at values of the right type, so a
// type error is reported once by the schema and never echoed as a rule violation.

import { CAPTURE_PROFILE, PHASES, type ImageRef } from './types.ts';
import { type ImageEncoding, type Mode, type ModuleId, type Phase, MAX_EVENTS_COLOR, MAX_EVENTS_RGB_SINGLE } from '../contract/index.ts';
import type { IssueList, Loc } from './issues.ts';

export const MODULE_MODES: Record<ModuleId, readonly Mode[]> = {
  rgb_liveness: ['rgb_single', 'rgb_sequence'],
  color_liveness: ['color'],
};

export { CAPTURE_PROFILE, PHASES };

const MODES: readonly string[] = ['rgb_single', 'rgb_sequence', 'color'];
const STATUSES: readonly string[] = ['ok', 'face_unavailable', 'dropped'];
const ENCODINGS: readonly string[] = ['png', 'rgb8'];
const SHA256_HEX = /^[0-9a-f]{64}$/;
const OK_FIELDS = ['source_size', 'eyes_xy', 'image'] as const;
// with the u flag a paired surrogate is one code point, so Cs matches lone ones only
const LONE_SURROGATE = /\p{Cs}/u;

/** State shared by all captures of one request: the uniqueness rules span the batch. */
export interface RequestScope {
  moduleId: ModuleId;
  captureIds: Map<string, number>;
  parts: Map<string, Loc>;
  images: ImageRef[];
}

export function newScope(moduleId: ModuleId): RequestScope {
  return { moduleId, captureIds: new Map(), parts: new Map(), images: [] };
}

type Obj = Record<string, unknown>;

const isObject = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isSize = (v: unknown): v is [number, number] =>
  Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 2);
const isPoint = (v: unknown): v is [number, number] =>
  Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === 'number' && Number.isFinite(n));
const isEyes = (v: unknown): v is [[number, number], [number, number]] =>
  Array.isArray(v) && v.length === 2 && isPoint(v[0]) && isPoint(v[1]);

export function checkCapture(capture: unknown, captureIndex: number, loc: Loc, scope: RequestScope, out: IssueList): void {
  if (!isObject(capture)) return;
  const mode = typeof capture.mode === 'string' && MODES.includes(capture.mode) ? (capture.mode as Mode) : undefined;
  const complete = typeof capture.complete === 'boolean' ? capture.complete : undefined;

  if (mode !== undefined && !MODULE_MODES[scope.moduleId].includes(mode)) {
    const owner = mode === 'color' ? 'color_liveness' : 'rgb_liveness';
    out.issue([...loc, 'mode'], 'mode_not_in_module',
      `Mode '${mode}' belongs to module ${owner}, not ${scope.moduleId}; a request carries captures of one module only`,
      { module_id: scope.moduleId, allowed_modes: [...MODULE_MODES[scope.moduleId]] }, mode);
  }

  if (mode !== undefined && typeof capture.capture_profile === 'string'
      && Object.values(CAPTURE_PROFILE).includes(capture.capture_profile)
      && capture.capture_profile !== CAPTURE_PROFILE[mode]) {
    out.issue([...loc, 'capture_profile'], 'capture_profile_mismatch',
      `Mode '${mode}' requires capture_profile '${CAPTURE_PROFILE[mode]}'`,
      { mode, expected: CAPTURE_PROFILE[mode] }, capture.capture_profile);
  }

  // A lone surrogate ("\ud800" in the JSON) is not text: it cannot be encoded as UTF-8, so
  // PostgreSQL's jsonb refused the saved answer (a 500 settlement_failed after the charge, and
  // an operator's queue anyone could fill) and LMDB kept it mangled (U+FFFD in the console).
  if (typeof capture.capture_id === 'string' && LONE_SURROGATE.test(capture.capture_id)) {
    out.issue([...loc, 'capture_id'], 'string_unicode', 'Input should be well-formed Unicode text (it holds a lone surrogate)', undefined,
      capture.capture_id.length <= 256 ? capture.capture_id : undefined);
  }

  if (typeof capture.capture_id === 'string' && capture.capture_id.length > 0) {
    const first = scope.captureIds.get(capture.capture_id);
    if (first === undefined) {
      scope.captureIds.set(capture.capture_id, captureIndex);
    } else {
      out.issue([...loc, 'capture_id'], 'duplicate_capture_id',
        `capture_id is already used by capture ${first} of this request`, { first_index: first }, capture.capture_id.length <= 256 ? capture.capture_id : undefined);
    }
  }

  if (!Array.isArray(capture.frames)) return;
  checkFrames(capture.frames, mode, complete, captureIndex, [...loc, 'frames'], scope, out);
}

function checkFrames(frames: unknown[], mode: Mode | undefined, complete: boolean | undefined,
  captureIndex: number, loc: Loc, scope: RequestScope, out: IssueList): void {
  // An empty capture that claims to be complete is a client bug that would still be charged as
  // a retry; an interrupted capture may end before its first frame (complete=false -> retry).
  if (frames.length === 0 && complete === true) {
    out.issue(loc, 'frames_empty', 'A capture with complete=true needs at least one event', { min_length: 1, complete: true });
  }
  if (mode === 'rgb_single' && frames.length > MAX_EVENTS_RGB_SINGLE) {
    out.issue(loc, 'too_many_events', `Mode rgb_single carries at most ${MAX_EVENTS_RGB_SINGLE} event, not ${frames.length}`,
      { mode, max_events: MAX_EVENTS_RGB_SINGLE, actual: frames.length });
  }
  if (mode === 'color' && frames.length > MAX_EVENTS_COLOR) {
    out.issue(loc, 'too_many_events', `Mode color carries at most ${MAX_EVENTS_COLOR} events, not ${frames.length}`,
      { mode, max_events: MAX_EVENTS_COLOR, actual: frames.length });
  }
  if (mode === 'color' && complete === true && frames.length > 0 && frames.length < PHASES.length) {
    out.issue(loc, 'phases_incomplete',
      `A complete colour capture has the four phases white, red, green, blue; ${frames.length} sent (send a prefix only with complete=false)`,
      { expected: [...PHASES], actual_length: frames.length });
  }

  let prevIndex: number | undefined;
  let prevTime: number | undefined;
  let size: { value: [number, number]; frame: number } | undefined;

  for (let i = 0; i < frames.length; i++) {
    if (out.full) return;
    const frame = frames[i];
    // The previous frame's timestamp, valid or not, is what display_time_us is compared with.
    const prevFrameTime = i > 0 && isObject(frames[i - 1]) && isCount((frames[i - 1] as Obj).timestamp_us)
      ? ((frames[i - 1] as Obj).timestamp_us as number) : undefined;
    if (!isObject(frame)) continue;
    const at = [...loc, i];

    if (isCount(frame.source_index)) {
      if (prevIndex !== undefined && frame.source_index <= prevIndex) {
        out.issue([...at, 'source_index'], 'not_increasing',
          `source_index must be strictly greater than the previous frame's ${prevIndex}`, { previous: prevIndex }, frame.source_index);
      }
      prevIndex = frame.source_index;
    }
    if (isCount(frame.timestamp_us)) {
      if (prevTime !== undefined && frame.timestamp_us <= prevTime) {
        out.issue([...at, 'timestamp_us'], 'not_increasing',
          `timestamp_us must be strictly greater than the previous frame's ${prevTime}`, { previous: prevTime }, frame.timestamp_us);
      }
      prevTime = frame.timestamp_us;
    }

    const status = typeof frame.status === 'string' && STATUSES.includes(frame.status) ? frame.status : undefined;
    if (status === 'ok') {
      for (const key of OK_FIELDS) {
        if (frame[key] === undefined) {
          out.issue([...at, key], 'missing', `Field required when status is 'ok'`, { status });
        }
      }
    } else if (status !== undefined) {
      for (const key of OK_FIELDS) {
        if (frame[key] !== undefined) {
          out.issue([...at, key], 'field_forbidden', `Not allowed when status is '${status}': failure events carry no image data`, { status });
        }
      }
    }

    if (mode === 'color') {
      if (frame.phase === undefined) {
        out.issue([...at, 'phase'], 'missing', 'Field required in mode color', { mode });
      } else if (i < PHASES.length && typeof frame.phase === 'string'
          && PHASES.includes(frame.phase as Phase) && frame.phase !== PHASES[i]) {
        out.issue([...at, 'phase'], 'phase_order', `Event ${i} of a colour capture must be phase '${PHASES[i]}'; phases run white, red, green, blue`,
          { expected: PHASES[i] }, frame.phase);
      }
      if (isCount(frame.display_time_us)) {
        const shown = frame.display_time_us;
        if (isCount(frame.timestamp_us) && shown > frame.timestamp_us) {
          out.issue([...at, 'display_time_us'], 'display_time_after_exposure',
            `display_time_us must not be later than this frame's timestamp_us ${frame.timestamp_us}`, { timestamp_us: frame.timestamp_us }, shown);
        }
        if (prevFrameTime !== undefined && shown <= prevFrameTime) {
          out.issue([...at, 'display_time_us'], 'display_time_not_after_previous',
            `display_time_us must be strictly later than the previous phase's timestamp_us ${prevFrameTime}`, { previous_timestamp_us: prevFrameTime }, shown);
        }
      }
    } else if (mode !== undefined) {
      for (const key of ['phase', 'display_time_us'] as const) {
        if (frame[key] !== undefined) {
          out.issue([...at, key], 'field_forbidden', `Not allowed in mode ${mode}: only colour captures carry ${key}`, { mode });
        }
      }
    }

    const ownSize = isSize(frame.source_size) ? frame.source_size : undefined;
    if (ownSize) {
      if (size === undefined) {
        size = { value: ownSize, frame: i };
      } else if (ownSize[0] !== size.value[0] || ownSize[1] !== size.value[1]) {
        out.issue([...at, 'source_size'], 'source_size_changed',
          `source_size must stay ${size.value[0]}x${size.value[1]} (frame ${size.frame}) throughout the capture`,
          { expected: [...size.value], first_frame_index: size.frame }, [...ownSize]);
      }
    }

    if (isEyes(frame.eyes_xy)) checkEyes(frame.eyes_xy, ownSize, [...at, 'eyes_xy'], out);

    checkImage(frame, status, captureIndex, i, [...at, 'image'], scope, out);
  }
}

// The image spans [0, w] x [0, h] in the continuous coordinates of the crop geometry (pixel k
// covers [k, k+1)), so a point on the far edge is still inside.
function checkEyes(eyes: [[number, number], [number, number]], size: [number, number] | undefined, loc: Loc, out: IssueList): void {
  if (size) {
    const [w, h] = size;
    eyes.forEach(([x, y], k) => {
      if (x < 0 || x > w || y < 0 || y > h) {
        out.issue([...loc, k], 'eyes_outside_image', `Eye point (${x}, ${y}) lies outside the ${w}x${h} source image [0, ${w}] x [0, ${h}]`,
          { width: w, height: h }, [x, y]);
      }
    });
  }
  const dx = eyes[1][0] - eyes[0][0];
  if (dx < 0) {
    out.issue(loc, 'eyes_not_sorted', 'eyes_xy must be sorted by x ascending', undefined, eyes);
  } else if (dx < 2) {
    out.issue(loc, 'eyes_too_close', `x1 - x0 must be at least 2 pixels, not ${dx}`, { min_dx: 2, dx }, eyes);
  }
}

// review 3, F6: the field name must equal image.part exactly, and these have no one agreed
// escaping in a Content-Disposition name (WHATWG FormData sends `"` as %22 and CR/LF as
// %0D/%0A; others escape `"` as `\"`): such a reference could never match the part every
// encoder sends for it. A backslash can be sent (src/http/multipart/syntax.ts readQuoted reads
// it raw, as browsers, undici and curl send it, and `\\` as one, as Python's encoders send
// it), except where the two readings collide: two backslashes in a row (sent raw, they read as
// one) and a backslash at the end (sent raw, it escapes the closing quote) (review3b). The
// client package refuses these names and any backslash (client/src/multipart.ts).
const UNSENDABLE_IN_PART_NAME = /["\r\n]|\\\\|\\$/;

function checkImage(frame: Obj, status: string | undefined, captureIndex: number, frameIndex: number,
  loc: Loc, scope: RequestScope, out: IssueList): void {
  const image = frame.image;
  if (!isObject(image) || typeof image.part !== 'string' || image.part.length === 0) return;
  const part = image.part;
  if (UNSENDABLE_IN_PART_NAME.test(part)) {
    out.issue([...loc, 'part'], 'part_name_unsendable',
      'image.part must not contain a double quote, CR, LF or two backslashes in a row, nor end with a backslash: standard multipart encoders (browsers, FormData, curl, Python\'s) encode these differently in the part\'s Content-Disposition, so no part would arrive under this name for every client',
      undefined, part.length <= 256 ? part : undefined);
    return;
  }
  if (part === 'metadata') {
    out.issue([...loc, 'part'], 'part_reserved', "'metadata' is the name of the metadata field and cannot hold an image", undefined, part);
    return;
  }
  const first = scope.parts.get(part);
  if (first !== undefined) {
    out.issue([...loc, 'part'], 'duplicate_part', 'image.part is already referenced elsewhere in this request; each part holds one image',
      { first_loc: first }, part.length <= 256 ? part : undefined);
    return;
  }
  scope.parts.set(part, loc);
  if (status === 'ok' && typeof image.encoding === 'string' && ENCODINGS.includes(image.encoding)
      && typeof image.sha256 === 'string' && SHA256_HEX.test(image.sha256)) {
    scope.images.push({ part, encoding: image.encoding as ImageEncoding, sha256: image.sha256, captureIndex, frameIndex, loc });
  }
}
