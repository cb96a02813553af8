// parseMetadata: the `metadata` text field -> validated captures, or every problem at once.
// Order (documented in README.md of this folder): JSON syntax (422) -> event and capture
// counts (413, as soon as the arrays are known, before any schema error) -> schema and rules
// together (422 with all items).

import { ServiceError, ValidationFailure } from '../errors/index.ts';
import type { CapturePacket, ParsedMetadata } from './types.ts';
import { type ModuleId, MAX_CAPTURES_PER_REQUEST, MAX_EVENTS_PER_CAPTURE, MAX_EVENTS_PER_REQUEST } from '../contract/index.ts';
import { BatchEnvelopeSchema, CapturePacketSchema } from './schemas.ts';
import { IssueList, METADATA_LOC, addSchemaErrors, type Loc } from './issues.ts';
import { compileCodePoints } from './lengths.ts';
import { checkCapture, newScope } from './rules.ts';

// lengths in code points (capture_id: 1 to 128 characters), as the admin bodies' (lengths.ts)
const checkPacket = compileCodePoints(CapturePacketSchema);
const checkEnvelope = compileCodePoints(BatchEnvelopeSchema);

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

export function parseMetadata(text: string, moduleId: ModuleId): ParsedMetadata {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ValidationFailure([
      { loc: [...METADATA_LOC], msg: `Invalid JSON: ${reason}`, type: 'json_invalid', ctx: { error: reason } },
    ]);
  }

  // Any object with a `captures` key is an envelope; a packet never has that key, so reading
  // it as a packet would only add a confusing extra_forbidden item.
  const batch = isObject(root) && Object.hasOwn(root, 'captures');
  enforceCounts(root, batch);

  const out = new IssueList();
  const scope = newScope(moduleId);
  const check = batch ? checkEnvelope : checkPacket;
  if (!check.Check(root)) addSchemaErrors(check.Errors(root), [...METADATA_LOC], root, out);

  const captures: unknown[] = batch
    ? (Array.isArray((root as { captures: unknown }).captures) ? (root as { captures: unknown[] }).captures : [])
    : [root];
  captures.forEach((capture, i) => {
    const loc: Loc = batch ? [...METADATA_LOC, 'captures', i] : [...METADATA_LOC];
    checkCapture(capture, i, loc, scope, out);
  });

  if (out.length > 0) throw new ValidationFailure(out.items);
  return { captures: captures as CapturePacket[], batch, images: scope.images, text };
}

/** 413 limits of interface-spec.md "Limits". Checked on the raw JSON so that an oversized
 * batch is refused as too large even when it is also malformed: the size is what the client
 * must fix first, and counting is cheaper than validating 10 000 frames. */
function enforceCounts(root: unknown, batch: boolean): void {
  const captures = batch ? (root as { captures: unknown }).captures : [root];
  if (!Array.isArray(captures)) return;
  if (captures.length > MAX_CAPTURES_PER_REQUEST) {
    throw new ServiceError('payload_too_large',
      `metadata holds ${captures.length} captures; at most ${MAX_CAPTURES_PER_REQUEST} per request`);
  }
  let total = 0;
  for (let i = 0; i < captures.length; i++) {
    const capture = captures[i];
    if (!isObject(capture) || !Array.isArray(capture.frames)) continue;
    const n = capture.frames.length;
    if (n > MAX_EVENTS_PER_CAPTURE) {
      const where = batch ? `captures[${i}].frames` : 'frames';
      throw new ServiceError('payload_too_large',
        `${where} holds ${n} events; at most ${MAX_EVENTS_PER_CAPTURE} per capture`);
    }
    total += n;
    if (total > MAX_EVENTS_PER_REQUEST) {
      throw new ServiceError('payload_too_large',
        `metadata holds more than ${MAX_EVENTS_PER_REQUEST} events; at most ${MAX_EVENTS_PER_REQUEST} per request`);
    }
  }
}
