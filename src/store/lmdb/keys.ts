import type { KeyFile, KeyRevocation } from '../records.ts';

// One host needs no shared keys: the files in DATA_DIR/keys stay the single source
// (signing/source.ts picks them), so reaching these is a wiring mistake.

const NOT_HERE = 'the LMDB store keeps signing keys in DATA_DIR/keys';

export function listSigningKeys(): Promise<KeyFile[]> {
  return Promise.reject(new Error(NOT_HERE));
}
export function createFirstSigningKey(): Promise<KeyFile> {
  return Promise.reject(new Error(NOT_HERE));
}
export function rotateSigningKey(): Promise<{ kid: string; retired: string | null; deleted: string[] }> {
  return Promise.reject(new Error(NOT_HERE));
}
export function revokeSigningKey(): Promise<KeyRevocation | null> {
  return Promise.reject(new Error(NOT_HERE));
}
export function deleteRetiredSigningKeys(): Promise<string[]> {
  return Promise.reject(new Error(NOT_HERE));
}
