// SHA-256 through Web Crypto, which Node 20 and every current browser provide as
// globalThis.crypto; nothing of node:crypto, so the same code runs in a capture page.
// Browsers expose crypto.subtle only in secure contexts (HTTPS, or http://localhost).

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const subtle = globalThis.crypto?.subtle;
  if (subtle === undefined) {
    throw new Error('sha256Hex: Web Crypto (crypto.subtle) is unavailable; browsers offer it only on HTTPS or localhost pages');
  }
  // digest() wants an ArrayBuffer-backed view; a copy is only needed for a SharedArrayBuffer
  const view = bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
  const digest = new Uint8Array(await subtle.digest('SHA-256', view));
  let hex = '';
  for (const b of digest) hex += b.toString(16).padStart(2, '0');
  return hex;
}

export function randomId(): string {
  return globalThis.crypto.randomUUID();
}
