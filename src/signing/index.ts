export { signBody, signerFor, VerdictSigner } from './sign.ts';
export { ensureSigningKey, listKeys, publicJwks, rotateSigningKey, RETIRED_PUBLISH_MS, type KeyFile } from './keys.ts';
