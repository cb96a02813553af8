export { ERRORS, errorBody, ServiceError, ValidationFailure, type ErrorCode } from './codes.ts';
