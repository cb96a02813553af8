import { createRequire } from 'node:module';
import type * as UWS from '@trufflesuite/uws-js-unofficial';

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
export type UwsModule = typeof UWS;

export class NativeBindingError extends Error {}

/** Loads the native uWebSockets.js binding directly. The package's own entry point falls
 * back to a slow pure-JS server without failing when the binary does not load (wrong
 * glibc, wrong ABI); serving on that fallback would be a silent outage of a different kind,
 * so the service refuses to start instead. */
export function loadUws(): UwsModule {
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const require = createRequire(import.meta.url);
  try {
    const mod = require(`@trufflesuite/uws-js-unofficial/binaries/${file}`) as UwsModule;
    if (typeof mod.App !== 'function' || typeof mod.us_listen_socket_close !== 'function') {
      throw new Error('binding lacks App/us_listen_socket_close');
    }
    return mod;
  } catch (e) {
    throw new NativeBindingError(
      `uWebSockets.js native binding ${file} could not be loaded (${(e as Error).message.split('\n')[0]}). ` +
        'The service does not run on the pure-JS fallback; use Node 20 on glibc >= 2.36 (linux x64/arm64).',
    );
  }
}

export const LISTEN_EXCLUSIVE = 1;
export const LISTEN_SHARED = 0;

// The shipped typings lag the binding: listen(host, port, options, cb) and app.close() exist
// in this build (checked at start-up by the cluster test) but are not declared.
export function listen(app: import('@trufflesuite/uws-js-unofficial').TemplatedApp, host: string, port: number, options: number): Promise<import('@trufflesuite/uws-js-unofficial').us_listen_socket | false> {
  return new Promise((resolve) => (app as any).listen(host, port, options, resolve));
}

export function closeApp(app: import('@trufflesuite/uws-js-unofficial').TemplatedApp): void {
  (app as unknown as { close(): void }).close();
}
