export { prepareRequest, metadataText, type PreparedRequest } from './prepare.ts';
