import { ValidationFailure } from '../errors/index.ts';
import type { ReceivedPart } from './ports.ts';
import { checkMetadataPart, checkParts, METADATA_FIELD, parseMetadata, prepareCaptures, type ParsedMetadata, type PreparedCapture } from '../packets/index.ts';
import type { ModuleId, ValidationIssue } from '../contract/index.ts';

export interface PreparedRequest {
  parsed: ParsedMetadata;
  metadataText: string;
  captures: PreparedCapture[];
  /** every part but metadata, for the fingerprint (names and hashes) and the demo archive
   * (bytes); the bytes are empty where the step released the parts (any call but a demo's) */
  files: { name: string; sha256: string; bytes: Uint8Array }[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const EMPTY = new Uint8Array(0);

export function metadataText(part: ReceivedPart): string {
  try {
    return utf8.decode(part.data());
  } catch {
    throw new ValidationFailure([{ loc: ['body', METADATA_FIELD], msg: 'metadata is not valid UTF-8 text', type: 'string_unicode' }]);
  }
}

/** Everything the spec checks before quota and inference, in one pass: the metadata field,
 * the packet rules, the parts against the references, the hashes, and every image decoded.
 * Part and image faults of the whole request are reported together. `releaseParts` (a call
 * that will not archive its bytes): each image part's storage is given back as soon as it is
 * decoded, so a large rgb8 sequence is not held twice, as body and as pixels (an rgb8 part in
 * a frame-slab slot is its frame's pixels and stays until the caller releases the parts after
 * inference), and every other part once the step is done; `files` then keeps names and
 * hashes, with empty bytes. */
export function prepareRequest(moduleId: ModuleId, parts: ReceivedPart[], parsedEarly?: ParsedMetadata, releaseParts = false): PreparedRequest {
  const metaIssues = checkMetadataPart(parts);
  if (metaIssues.length > 0) throw new ValidationFailure(metaIssues);
  const parsed = parsedEarly ?? parseMetadata(metadataText(parts.find((p) => p.name === METADATA_FIELD)!), moduleId);

  const fileParts = parts.filter((p) => p.name !== METADATA_FIELD);
  const issues: ValidationIssue[] = checkParts(parsed.images, fileParts);
  const uploads = new Map<string, ReceivedPart[]>();
  for (const p of fileParts) uploads.set(p.name, [...(uploads.get(p.name) ?? []), p]);
  const declared = new Map(parsed.images.map((r) => [r.part, r.sha256]));
  // Parts whose storage the pixels are (rgb8 in a frame-slab slot, read in place by the
  // inference thread): given back with the call's other parts once it is over, not here.
  const pixelParts = new Set<string>();
  // Decode only a part checkParts could accept (uploaded once, hash as declared): any other
  // is already reported, and decoding it would only add noise.
  const captures = prepareCaptures(parsed, (name) => {
    const list = uploads.get(name);
    return list?.length === 1 && list[0]!.sha256 === declared.get(name) ? list[0]!.data() : undefined;
  }, issues, releaseParts ? (name, bytes, pixels) => {
    if (pixels && pixels.buffer === bytes.buffer && pixels.byteOffset === bytes.byteOffset) pixelParts.add(name);
    else uploads.get(name)?.[0]?.release?.();
  } : undefined);
  const files = fileParts.map((p) => ({ name: p.name, sha256: p.sha256, bytes: releaseParts ? EMPTY : p.data() }));
  if (releaseParts) for (const p of parts) if (!pixelParts.has(p.name)) p.release?.();
  return { parsed, metadataText: parsed.text, captures, files };
}
