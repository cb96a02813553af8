import { ServiceError, ValidationFailure, type ErrorCode } from '../../errors/index.ts';

// Each parser failure kind, declared once with the service error it answers as. The three
// size kinds share 413 because interface-spec.md's Limits name one code for body, part and
// batch overruns. A body that is not valid multipart is bad input: the spec's error table has
// no 400 for it, so it is a 422 whose detail points at the body (or the part at fault).
export const MULTIPART_ERROR_CODES = {
  part_too_large: 'payload_too_large',
  too_many_parts: 'payload_too_large',
  header_too_large: 'payload_too_large',
  malformed: 'invalid_input',
} as const satisfies Record<string, ErrorCode>;

export type MultipartErrorKind = keyof typeof MULTIPART_ERROR_CODES;

/** The parser's own error, kept free of HTTP so the parser can be tested alone: `code` names
 * the catalogue entry the HTTP layer answers with. */
export class MultipartError extends Error {
  readonly kind: MultipartErrorKind;
  /** The service error code the HTTP layer should answer with. */
  readonly code: ErrorCode;
  /** Form-field name of the part at fault, when its headers had been read. */
  readonly partName: string | null;

  constructor(kind: MultipartErrorKind, message: string, partName: string | null = null) {
    super(message);
    this.name = 'MultipartError';
    this.kind = kind;
    this.code = MULTIPART_ERROR_CODES[kind];
    this.partName = partName;
  }

  /** The error the HTTP layer answers with: a 422 with a detail list for bad framing, the
   * declared code (413) for the size kinds. */
  answer(): ServiceError | ValidationFailure {
    if (this.code !== 'invalid_input') return new ServiceError(this.code, this.message);
    return new ValidationFailure([{ loc: this.partName === null ? ['body'] : ['body', this.partName], msg: this.message, type: 'multipart_invalid' }]);
  }
}
