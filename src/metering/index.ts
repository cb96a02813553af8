// Metering's own rules: what makes two requests the same (fingerprint), what a call decided
// (outcome), where a client is (geo), demo archiving, and the operator's view of failed
// settlements. The records and the atomic reserve/settle/refund live in the store (store/),
// which applies them in one transaction with the quota.
export { listPendingSettlements, resolveSettlement, type SettlementView } from './settlements.ts';
export { requestFingerprint, canonicalJson } from './fingerprint.ts';
export { outcomeOfBody, outcomeOfResults } from './outcome.ts';
export { countryOf } from './geo.ts';
export { archiveDemoUpload } from './archive.ts';

export { geoDatabase, useGeoDatabase } from './geo.ts';
