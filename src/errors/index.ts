export { ERRORS, ServiceError, ValidationFailure, type ErrorCode } from './codes.ts';
