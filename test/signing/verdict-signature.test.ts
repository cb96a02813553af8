import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createLocalJWKSet, decodeProtectedHeader, flattenedVerify, type JSONWebKeySet } from 'jose';
import { publicJwks, rotateSigningKey, RETIRED_PUBLISH_MS, signBody, VerdictSigner } from '../../src/signing/index.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

/** What a backend does (src/signing/README.md "Checking a verdict in a backend"): re-attach the exact body bytes
 * as the payload of the detached JWS and verify it against the service's JWKS. */
async function check(jwks: JSONWebKeySet, body: string, signature: string): Promise<boolean> {
  const [protectedHeader, payload, sig] = signature.split('.');
  if (payload !== '' || !protectedHeader || !sig) return false;
  try {
    await flattenedVerify(
      { protected: protectedHeader, payload: Buffer.from(body, 'utf8').toString('base64url'), signature: sig },
      createLocalJWKSet(jwks),
      { algorithms: ['EdDSA'] },
    );
    return true;
  } catch {
    return false;
  }
}

const BODY = JSON.stringify({ request_id: 'r1', module_id: 'rgb_liveness', charged_units: 1, results: [{ capture_id: 'c1', status: 'ok', alive: true, score: 0.93 }], usage: [] });

t.test('a signature verifies with jose against the JWKS; a tampered body does not', async (t) => {
  const dir = tempDir();
  const sig = await signBody(dir, BODY);
  t.match(sig, /^[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]{86}$/, 'detached compact JWS: header..signature');
  const header = decodeProtectedHeader(sig);
  const jwks = publicJwks(dir) as JSONWebKeySet;
  t.same(header, { alg: 'EdDSA', kid: jwks.keys[0]!.kid });
  t.equal(jwks.keys.length, 1);
  t.notOk('d' in jwks.keys[0]!, 'the JWKS holds no private part');
  t.ok(await check(jwks, BODY, sig));
  t.notOk(await check(jwks, BODY.replace('"alive":true', '"alive":false'), sig), 'a flipped verdict fails');
  t.notOk(await check(jwks, BODY.replace('0.93', '0.94'), sig), 'a changed score fails');
  t.notOk(await check(jwks, `${BODY} `, sig), 'even whitespace fails: the exact bytes are signed');
  t.notOk(await check(publicJwks(tempDir()) as JSONWebKeySet, BODY, sig), 'another service\'s keys do not match');
  const stat = fs.statSync(path.join(dir, 'keys', `${header.kid}.json`));
  t.equal(stat.mode & 0o077, 0, 'the key file is private to the owner');
});

t.test('rotation: new kid signs, the old public key stays published for a while', async (t) => {
  const dir = tempDir();
  const signer = new VerdictSigner(dir);
  const before = await signer.sign(BODY);
  const oldKid = decodeProtectedHeader(before).kid;
  const at = Date.now();
  const rotated = await rotateSigningKey(dir, at);
  t.equal(rotated.retired, oldKid);
  const jwks = publicJwks(dir, at) as JSONWebKeySet;
  t.same(jwks.keys.map((k) => k.kid).sort(), [oldKid, rotated.kid].sort());
  t.ok(await check(jwks, BODY, before), 'a verdict signed before the rotation still checks');

  // a worker's signer notices the new kid after its re-check interval (1 s): polled, bounded
  const after = await waitFor(async () => {
    const sig = await signer.sign(BODY);
    return decodeProtectedHeader(sig).kid === rotated.kid ? sig : undefined;
  }, { timeoutMs: 15_000, what: 'the signer to sign with the rotated key' });
  t.equal(decodeProtectedHeader(after).kid, rotated.kid);
  t.ok(await check(jwks, BODY, after));

  const later = publicJwks(dir, at + RETIRED_PUBLISH_MS + 1) as JSONWebKeySet;
  t.same(later.keys.map((k) => k.kid), [rotated.kid], 'dropped from the JWKS after the publication period');
});

t.test('workers racing to create the first key agree on one', async (t) => {
  const dir = tempDir();
  const signers = Array.from({ length: 6 }, () => new VerdictSigner(dir));
  const sigs = await Promise.all(signers.map((s) => s.sign(BODY)));
  t.equal(new Set(sigs.map((s) => decodeProtectedHeader(s).kid)).size, 1);
  t.equal(publicJwks(dir).keys.length, 1);
});

// The server's JWKS and a `keys rotate` reaching it are checked on the server of
// test/signing/revocation.test.ts (issue 43: this file started its own for them).
