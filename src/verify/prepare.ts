import { ValidationFailure } from '../errors/index.ts';
import type { ReceivedPart } from '../http/multipart/index.ts';
import { checkMetadataPart, checkParts, METADATA_FIELD, parseMetadata, prepareCaptures } from '../packets/index.ts';
import type { ModuleId, ParsedMetadata, PreparedCapture, UploadedPart, ValidationIssue } from '../packets/types.ts';

export interface PreparedRequest {
  parsed: ParsedMetadata;
  metadataText: string;
  captures: PreparedCapture[];
  /** every part but metadata, for the fingerprint and the demo archive */
  files: { name: string; sha256: string; bytes: Uint8Array }[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function metadataText(part: ReceivedPart): string {
  try {
    return utf8.decode(part.data());
  } catch {
    throw new ValidationFailure([{ loc: ['body', METADATA_FIELD], msg: 'metadata is not valid UTF-8 text', type: 'string_unicode' }]);
  }
}

/** Everything the spec checks before quota and inference, in one pass: the metadata field,
 * the packet rules, the parts against the references, the hashes, and every image decoded.
 * Part and image faults of the whole request are reported together. */
export function prepareRequest(moduleId: ModuleId, parts: ReceivedPart[], parsedEarly?: ParsedMetadata): PreparedRequest {
  const metaIssues = checkMetadataPart(parts);
  if (metaIssues.length > 0) throw new ValidationFailure(metaIssues);
  const metaPart = parts.find((p) => p.name === METADATA_FIELD)!;
  const text = metadataText(metaPart);
  const parsed = parsedEarly ?? parseMetadata(text, moduleId);

  const fileParts = parts.filter((p) => p.name !== METADATA_FIELD);
  const uploaded: UploadedPart[] = fileParts.map((p) => ({ name: p.name, filename: p.filename, size: p.size, sha256: p.sha256 }));
  const issues: ValidationIssue[] = checkParts(parsed.images, uploaded);

  const byName = new Map<string, ReceivedPart>();
  for (const p of fileParts) if (!byName.has(p.name)) byName.set(p.name, p);
  // A missing part or a hash mismatch is already reported; decoding it would only add noise.
  const faulty = new Set(issues.map((i) => JSON.stringify(i.loc.slice(0, -1))));
  const refs = new Map(parsed.images.map((r) => [r.part, r]));
  const captures = prepareCaptures(parsed, (name) => {
    const part = byName.get(name);
    const ref = refs.get(name)!;
    return part && part.sha256 === ref.sha256 && !faulty.has(JSON.stringify(ref.loc)) ? part.data() : undefined;
  }, issues);
  return { parsed, metadataText: text, captures, files: fileParts.map((p) => ({ name: p.name, sha256: p.sha256, bytes: p.data() })) };
}
