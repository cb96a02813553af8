export { parseMultipartBoundary, readMultipartContentType, isValidBoundary, type ContentTypeFault } from './content-type.ts';
export { MultipartError, MULTIPART_ERROR_CODES, type MultipartErrorKind } from './errors.ts';
export type { PartHeaders } from './headers.ts';
export type { ReceivedPart } from './part.ts';
export { MultipartParser, type MultipartLimits, type MultipartHandlers } from './parser.ts';
