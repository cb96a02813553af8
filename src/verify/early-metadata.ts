import type { ReceivedPart } from './ports.ts';
import { METADATA_FIELD, parseMetadata, type ParsedMetadata } from '../packets/index.ts';
import type { ModuleId } from '../contract/index.ts';
import { metadataText } from './prepare.ts';

/** Parses the metadata the moment its part ends, so that a bad or oversized batch is refused
 * before the images behind it are uploaded: a throw from onPartEnd fails the upload itself.
 * A second metadata part, or one sent as a file, is left to prepareRequest to report. */
export function earlyMetadata(moduleId: ModuleId): { onPartEnd(part: ReceivedPart): void; parsed(): ParsedMetadata | undefined } {
  let parsed: ParsedMetadata | undefined;
  let seen = 0;
  return {
    onPartEnd(part) {
      if (part.name !== METADATA_FIELD) return;
      seen++;
      parsed = seen === 1 && part.filename === null ? parseMetadata(metadataText(part), moduleId) : undefined;
    },
    parsed: () => parsed,
  };
}
