export { ERRORS, errorBody, messageOf, ServiceError, ValidationFailure, type CodeWithVariants, type ErrorCode, type VariantOf } from './codes.ts';
export { retryAfter } from './retry-after.ts';
export { storeNotAnswering } from './store-not-answering.ts';

export { ISSUE_TYPES } from './issue-types.ts';
export { BEARER_CHALLENGE } from './challenge.ts';
