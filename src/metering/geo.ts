import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Reader } from 'mmdb-lib';

// Approximate country from an offline database shipped in a registry package (CC0):
// nothing is fetched at run time. Loaded once per thread on first use (~8 MB).
type Row = { country_code?: string };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let reader: Reader<any> | null | undefined;

function load(): Reader<any> | null {
  if (reader !== undefined) return reader;
  try {
    const require = createRequire(import.meta.url);
    const file = require.resolve('@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb');
    reader = new Reader(fs.readFileSync(file));
  } catch {
    reader = null;
  }
  return reader;
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
