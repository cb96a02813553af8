export { SharedSigner, signBody, signerFor, signerOf, VerdictSigner } from './sign.ts';
export { fileKeys, keySourceFor, SHARED_KEY_CACHE_MS, storeKeys, type KeySource } from './source.ts';
export { ensureSigningKey, listKeys, publicJwks, rotateSigningKey, RETIRED_PUBLISH_MS, type KeyFile } from './keys.ts';
