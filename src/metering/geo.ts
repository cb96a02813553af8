import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Reader } from 'mmdb-lib';

// Approximate country from an offline database shipped in a registry package (CC0):
// nothing is fetched at run time. The file is about 8 MB. A process with API workers reads it
// once, into shared memory, and every worker reads that (geoDatabase / useGeoDatabase): loaded
// per thread it cost 8 MB per API worker as soon as each saw a public address, about 250 MB
// of a 32-worker host (bench/uploads.ts). A thread that was handed nothing (tests, the CLI)
// reads the file itself on first use.
type Row = { country_code?: string };
let reader: Reader<any> | null | undefined;

function databaseFile(): string {
  return createRequire(import.meta.url).resolve('@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb');
}

/** The database in memory that threads can share, or null where it cannot be read. */
export function geoDatabase(): SharedArrayBuffer | null {
  let fd: number | undefined;
  try {
    // read straight into the shared memory: no second 8 MB copy in the reading thread
    fd = fs.openSync(databaseFile(), 'r');
    const shared = new SharedArrayBuffer(fs.fstatSync(fd).size);
    const view = new Uint8Array(shared);
    for (let at = 0; at < view.length;) {
      const n = fs.readSync(fd, view, at, view.length - at, at);
      if (n === 0) return null;
      at += n;
    }
    return shared;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** Reads countries from `shared` (from geoDatabase in another thread) instead of the file. */
export function useGeoDatabase(shared: SharedArrayBuffer | null): void {
  try {
    reader = shared ? new Reader(Buffer.from(shared)) : null;
  } catch {
    reader = null;
  }
}

function load(): Reader<any> | null {
  if (reader === undefined) useGeoDatabase(geoDatabase());
  return reader ?? null;
}

export function countryOf(ip: string): string | null {
  if (!ip || ip.startsWith('127.') || ip === '::1' || /^(10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/.test(ip)) return null;
  try {
    const hit = load()?.get(ip.replace(/^::ffff:/, '')) as Row | null | undefined;
    return hit?.country_code ?? null;
  } catch {
    return null;
  }
}
