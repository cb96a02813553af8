export * from './types.ts';
export {
  ImageDescriptorSchema, FrameSchema, CapturePacketSchema, BatchEnvelopeSchema, MetadataSchema,
} from './schemas.ts';
export { parseMetadata } from './validate.ts';
export { prepareCaptures } from './prepare.ts';
export { checkParts, checkMetadataPart, METADATA_FIELD, type PartHeader } from './parts.ts';
export { MODULE_MODES, CAPTURE_PROFILE, PHASES } from './rules.ts';
export { codePointLength, type Loc } from './issues.ts';
export { compileCodePoints } from './lengths.ts';

export { bodyParser } from './json-body.ts';
export { NAME_TEXT, NAME_TEXT_RULE, isNameText } from './name-text.ts';
