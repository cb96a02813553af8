// Multipart parts against the metadata (interface-spec.md "POST .../verify", request body):
// `metadata` is one text field; every image.part names exactly one file part, each file part
// is referenced once, nothing extra is uploaded, and the declared sha256 matches the bytes.
// Issues about a referenced image point into the metadata; a part the metadata does not know
// is reported at ["body", <part name>], the FastAPI location of a form field.

import type { ImageRef, UploadedPart } from './types.ts';
import type { ValidationIssue } from '../contract/index.ts';

export const METADATA_FIELD = 'metadata';

/** The header facts of a multipart part, as the stream parser sees them. */
export interface PartHeader {
  name: string;
  filename: string | null;
}

/** `metadata`: exactly one, and a text field (no filename). Pass every part of the body. */
export function checkMetadataPart(parts: readonly PartHeader[]): ValidationIssue[] {
  const meta = parts.filter((p) => p.name === METADATA_FIELD);
  if (meta.length === 0) {
    return [{ loc: ['body', METADATA_FIELD], msg: 'Field required: the metadata text field is missing', type: 'missing' }];
  }
  const issues: ValidationIssue[] = [];
  if (meta.length > 1) {
    issues.push({
      loc: ['body', METADATA_FIELD], msg: `The metadata field must appear once, not ${meta.length} times`,
      type: 'metadata_duplicate', ctx: { count: meta.length },
    });
  }
  if (meta.some((p) => p.filename !== null)) {
    issues.push({
      loc: ['body', METADATA_FIELD], msg: 'metadata must be a text field sent without a filename, not a file',
      type: 'metadata_not_text',
    });
  }
  return issues;
}

/** Images referenced by the metadata against the uploaded parts (all parts but `metadata`).
 * Hash equality is only judged for a reference that resolves to exactly one file part. */
export function checkParts(images: readonly ImageRef[], uploaded: readonly UploadedPart[]): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const byName = new Map<string, UploadedPart[]>();
  for (const part of uploaded) {
    const list = byName.get(part.name);
    if (list) list.push(part);
    else byName.set(part.name, [part]);
  }

  for (const [name, list] of byName) {
    if (list.length > 1) {
      issues.push({
        loc: ['body', name], msg: `Part '${name}' is uploaded ${list.length} times; each part name appears once`,
        type: 'part_duplicate', ctx: { count: list.length },
      });
    }
  }

  // parseMetadata already refused a part referenced twice, so each ref names its own part.
  const referenced = new Map<string, ImageRef>();
  for (const ref of images) {
    const partLoc = [...ref.loc, 'part'];
    referenced.set(ref.part, ref);
    const list = byName.get(ref.part);
    if (!list) {
      issues.push({
        loc: partLoc, msg: `No file part named '${ref.part}' was uploaded`, type: 'part_missing', input: ref.part,
      });
      continue;
    }
    if (list.length !== 1) continue;
    const [part] = list;
    if (part.filename === null) {
      issues.push({
        loc: partLoc, msg: `Part '${ref.part}' is a text field; images are sent as file parts (with a filename)`,
        type: 'part_not_file', input: ref.part,
      });
      continue;
    }
    if (part.sha256 !== ref.sha256) {
      issues.push({
        loc: [...ref.loc, 'sha256'], msg: `sha256 does not match the ${part.size} bytes uploaded in part '${ref.part}'`,
        type: 'sha256_mismatch', input: ref.sha256, ctx: { actual: part.sha256, size: part.size },
      });
    }
  }

  for (const name of byName.keys()) {
    if (!referenced.has(name)) {
      issues.push({
        loc: ['body', name], msg: `Part '${name}' is not referenced by any image.part; extra parts are not accepted`,
        type: 'part_unreferenced',
      });
    }
  }
  return issues;
}
