// The start-up hang of issue 39, reduced: Node 20's KeyObject.export({ format: 'jwk' }) holds the
// key's mutex while it allocates, and a garbage collection then may finalize the finished
// generateKeyPairSync job, whose destructor takes the same mutex: the thread waits on itself
// for ever (gdb: ExportJWKEdKey -> CollectGarbage -> ~KeyGenJob -> pthread_mutex_lock).
// src/signing/keys.ts asks the generation for JWK instead. Each mode runs for 8 s at most:
//
//   timeout 20 node bench/keygen-export.mjs export   # the old way: hangs (timeout's exit 124)
//   timeout 20 node bench/keygen-export.mjs encoded  # the way keys.ts does it: prints a count
import { generateKeyPairSync } from 'node:crypto';

const mode = process.argv[2] ?? 'encoded';
const t0 = Date.now();
let i = 0;
for (; Date.now() - t0 < 8000; i++) {
  if (mode === 'export') generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  else generateKeyPairSync('ed25519', { privateKeyEncoding: { format: 'jwk' }, publicKeyEncoding: { format: 'jwk' } });
}
console.log(JSON.stringify({ mode, keys: i, node: process.version }));
