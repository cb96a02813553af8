export { ERRORS, ServiceError, ValidationFailure, type ErrorCode } from './codes.ts';
export { retryAfter } from './retry-after.ts';
