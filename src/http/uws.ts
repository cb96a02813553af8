import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as UWS from '@trufflesuite/uws-js-unofficial';

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from '@trufflesuite/uws-js-unofficial';
export type UwsModule = typeof UWS;

/** Not an HTTP error: no uWebSockets.js binding loads on this host (glibc, Node ABI), found at
 * start-up before anything listens; the service refuses to start and says which builds it tried. */
export class NativeBindingError extends Error {}

/** The uWebSockets.js builds the service can serve on, newest first. Each ships its bindings
 * per Node ABI and needs a minimum glibc: 20.57 has Node 20/22/24/25 but needs glibc 2.38;
 * 20.30 needs only 2.36 but stops at Node 20. No single package covers a Debian 12 host on
 * Node 20 and a Debian 13 image on Node 24, so the choice is made where the process runs. The
 * types come from 20.30: 20.57's API is a superset for everything the service calls, which the
 * container test exercises on Node 24. `bindings` is where the .node files sit relative to
 * the package root. */
export const UWS_BUILDS = [
  { pkg: '@btc-vision/uwebsockets.js', bindings: '.' },
  { pkg: '@trufflesuite/uws-js-unofficial', bindings: 'binaries' },
] as const;

export interface UwsBuild {
  /** npm package the binding came from */
  package: string;
  version: string;
  /** file name of the native binding: platform, architecture and Node ABI */
  binding: string;
}

export interface UwsCandidateFailure {
  package: string;
  reason: string;
}

let chosen: { build: UwsBuild; skipped: UwsCandidateFailure[] } | null = null;

/** Which build this thread serves on, and why newer ones were passed over; null before
 * loadUws() ran in this thread (each worker thread loads its own copy). */
export function uwsBuild(): { build: UwsBuild; skipped: UwsCandidateFailure[] } | null {
  return chosen;
}

/** `require.resolve` of the package name honours its `exports` map, which for 20.57 hides
 * both package.json and the .node files, so the root is found from the entry point. */
function packageRoot(require: NodeJS.Require, pkg: string): string {
  let dir = dirname(require.resolve(pkg));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === pkg) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`package root of ${pkg} not found`);
    dir = up;
  }
}

/** Loads the newest native uWebSockets.js binding that loads here. 20.30's entry point falls
 * back to a slow pure-JS server without failing when its binary does not load (wrong glibc,
 * wrong ABI); serving on that fallback would be a silent outage of a different kind, so the
 * binary is required directly (for both builds, one way) and the service refuses to start
 * when none loads. */
export function loadUws(builds: readonly { pkg: string; bindings: string }[] = UWS_BUILDS): UwsModule {
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const require = createRequire(import.meta.url);
  const skipped: UwsCandidateFailure[] = [];
  for (const { pkg, bindings } of builds) {
    try {
      const root = packageRoot(require, pkg);
      const path = join(root, bindings, file);
      if (!existsSync(path)) throw new Error(`no ${file} in the package (Node ABI ${process.versions.modules} not built)`);
      const mod = require(path) as UwsModule;
      if (typeof mod.App !== 'function' || typeof mod.us_listen_socket_close !== 'function') {
        throw new Error('binding lacks App/us_listen_socket_close');
      }
      const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
      chosen = { build: { package: pkg, version, binding: file }, skipped };
      return mod;
    } catch (e) {
      skipped.push({ package: pkg, reason: (e as Error).message.split('\n')[0]! });
    }
  }
  throw new NativeBindingError(
    `no uWebSockets.js native binding loads for ${file}: ${skipped.map((s) => `${s.package}: ${s.reason}`).join('; ')}. ` +
      'The service does not run on a pure-JS fallback; use Node 22 or 24 on glibc >= 2.38, or Node 20 on glibc >= 2.36 (linux x64/arm64); docs/platforms.md.',
  );
}

/** The build in one line, for the start-up log and /health/ready. */
export function describeUwsBuild(): string | null {
  return chosen ? `${chosen.build.package}@${chosen.build.version} (${chosen.build.binding})` : null;
}

export const LISTEN_EXCLUSIVE = 1;
export const LISTEN_SHARED = 0;

// The shipped typings lag the binding: listen(host, port, options, cb) and app.close() exist
// in both builds (checked at start-up by the cluster test) but are not declared.
export function listen(app: import('@trufflesuite/uws-js-unofficial').TemplatedApp, host: string, port: number, options: number): Promise<import('@trufflesuite/uws-js-unofficial').us_listen_socket | false> {
  return new Promise((resolve) => (app as any).listen(host, port, options, resolve));
}

export function closeApp(app: import('@trufflesuite/uws-js-unofficial').TemplatedApp): void {
  (app as unknown as { close(): void }).close();
}
