import { createLocalJWKSet, decodeProtectedHeader, flattenedVerify, type JSONWebKeySet } from 'jose';
import { postVerify, request, single } from './captures.ts';

// Signed verdicts as a backend sees them: the JWKS a node serves, a verify answer with its
// detached signature, and the check a backend makes (src/signing/README.md "Checking a verdict in a backend").

export async function jwksOf(n: { baseUrl: string }): Promise<JSONWebKeySet> {
  const r = await fetch(`${n.baseUrl}/.well-known/jwks.json`);
  if (r.status !== 200) throw new Error(`jwks ${r.status}`);
  return (await r.json()) as JSONWebKeySet;
}

/** What a backend does: the exact body bytes as the payload of the detached JWS, checked
 * against a JWKS. */
export async function verdictChecks(jwks: JSONWebKeySet, body: string, signature: string): Promise<boolean> {
  const [protectedHeader, payload, sig] = signature.split('.');
  if (payload !== '' || !protectedHeader || !sig) return false;
  try {
    await flattenedVerify({ protected: protectedHeader, payload: Buffer.from(body, 'utf8').toString('base64url'), signature: sig }, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] });
    return true;
  } catch {
    return false;
  }
}

let seq = 0;
/** One charged verify call on `n`: its body, its signature and the kid that signed it. */
export async function signedVerdict(n: { baseUrl: string }, token: string): Promise<{ body: string; signature: string; kid: string }> {
  const id = `sv-${process.pid}-${++seq}`;
  const r = await postVerify(n.baseUrl, token, 'rgb_liveness', request([single({ id })]), { 'idempotency-key': id });
  if (r.status !== 200) throw new Error(`verify ${r.status}: ${r.text}`);
  const signature = r.headers.get('x-verdict-signature')!;
  return { body: r.text, signature, kid: decodeProtectedHeader(signature).kid! };
}
