export { prepareRequest, metadataText, type PreparedRequest } from './prepare.ts';
export { earlyMetadata } from './early-metadata.ts';
