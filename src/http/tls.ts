import fs from 'node:fs';
import tls from 'node:tls';
import type { Config } from '../config/index.ts';
import type { UwsModule } from './uws.ts';

type TlsConfig = Pick<Config, 'TLS_CERT_FILE' | 'TLS_KEY_FILE' | 'TLS_KEY_PASSPHRASE'>;

/** Not an HTTP error: a certificate or key refused at start-up, before anything listens. */
export class TlsConfigError extends Error {}

/**
 * Checks the certificate, key and passphrase with Node's own TLS before any thread starts:
 * uWS's SSLApp only prints to stderr on a bad file and then serves a context that fails
 * every handshake, which would look like a running service that nobody can reach.
 */
export function checkTls(config: TlsConfig): void {
  if (!config.TLS_CERT_FILE || !config.TLS_KEY_FILE) return;
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = fs.readFileSync(config.TLS_CERT_FILE);
  } catch (e) {
    throw new TlsConfigError(`TLS_CERT_FILE: cannot read ${config.TLS_CERT_FILE} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    key = fs.readFileSync(config.TLS_KEY_FILE);
  } catch (e) {
    throw new TlsConfigError(`TLS_KEY_FILE: cannot read ${config.TLS_KEY_FILE} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    tls.createSecureContext({ cert, key, passphrase: config.TLS_KEY_PASSPHRASE });
  } catch (e) {
    throw new TlsConfigError(`TLS_CERT_FILE/TLS_KEY_FILE/TLS_KEY_PASSPHRASE: certificate and key do not load together (${(e as Error).message})`);
  }
}

/** TLS 1.2 suites offered: forward-secret (ECDHE) AEAD only, for ECDSA and RSA keys. uWS's
 * BoringSSL default also offers CBC suites and, with an RSA key, static-RSA key exchange
 * (AES128-SHA and the like: no forward secrecy). TLS 1.3 suites are BoringSSL's fixed set,
 * all forward-secret AEAD, and are not affected by this list. TLS 1.0/1.1 are not served by
 * this build at all. (Names in BoringSSL's spelling.) */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** HSTS on every answer served over TLS: a browser that has been here once goes to HTTPS
 * directly for a year instead of trying plain HTTP first. No includeSubDomains: the service
 * does not know what else its domain serves. */
export const HSTS = 'max-age=31536000';

export function servesTls(config: TlsConfig): boolean {
  return Boolean(config.TLS_CERT_FILE && config.TLS_KEY_FILE);
}

/** The uWS module the app factory sees: `App()` builds an SSLApp when TLS is configured, so
 * the HTTP layer stays the same for both. */
export function appModule(uws: UwsModule, config: TlsConfig): UwsModule {
  if (!config.TLS_CERT_FILE || !config.TLS_KEY_FILE) return uws;
  const options = { cert_file_name: config.TLS_CERT_FILE, key_file_name: config.TLS_KEY_FILE, passphrase: config.TLS_KEY_PASSPHRASE, ssl_ciphers: TLS12_CIPHERS };
  return { ...uws, App: () => uws.SSLApp(options) };
}
