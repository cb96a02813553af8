export { SharedSigner, signBody, signerFor, signerOf, VerdictSigner } from './sign.ts';
export { fileKeys, keySourceFor, SHARED_KEY_CACHE_MS, storeKeys, type KeySource } from './source.ts';
export { keysDir, KID_PATTERN, withKeysLock } from './keys.ts';
export { ensureSigningKey, listKeys, publicJwks, revokeSigningKey, rotateSigningKey, RETIRED_PUBLISH_MS, UnknownSigningKeyError, type KeyFile, type KeyRevocation } from './keys.ts';

export { publicJwksOf } from './keys.ts';
export { KeyFolderError, keysForRestore } from './restore.ts';
