import fs from 'node:fs';
import tls from 'node:tls';
import type { Config } from '../config/index.ts';
import type { UwsModule } from './uws.ts';

type TlsConfig = Pick<Config, 'TLS_CERT_FILE' | 'TLS_KEY_FILE' | 'TLS_KEY_PASSPHRASE'>;

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

/** The uWS module the app factory sees: `App()` builds an SSLApp when TLS is configured, so
 * the HTTP layer stays the same for both. */
export function appModule(uws: UwsModule, config: TlsConfig): UwsModule {
  if (!config.TLS_CERT_FILE || !config.TLS_KEY_FILE) return uws;
  const options = { cert_file_name: config.TLS_CERT_FILE, key_file_name: config.TLS_KEY_FILE, passphrase: config.TLS_KEY_PASSPHRASE };
  return { ...uws, App: () => uws.SSLApp(options) };
}
