import { isIP } from 'node:net';
import proxyaddr from 'proxy-addr';
import type { Config } from '../config/index.ts';

// TRUSTED_PROXIES is parsed by proxy-addr (the library Express uses): exact addresses, CIDR
// ranges in IPv4 and IPv6 (`10.0.0.0/8`, `fd00::/8`, `10.0.0.0/255.0.0.0`) and its names
// `loopback`, `linklocal`, `uniquelocal`; IPv4-mapped IPv6 peers match their IPv4 ranges.

type Trust = (addr: string, i: number) => boolean;
const compiled = new WeakMap<readonly string[], Trust>();

/** Compiles the list once per configuration; throws a TypeError naming a bad entry. */
export function compileTrust(list: readonly string[]): Trust {
  let trust = compiled.get(list);
  if (!trust) {
    trust = proxyaddr.compile([...list]);
    compiled.set(list, trust);
  }
  return trust;
}

export interface ResolvedClient {
  /** the address to account the call to (audit, throttles, verify slots): always an IP address */
  address: string;
  /** the nearest untrusted X-Forwarded-For hop was not an IP address (`127.evil`, `1.2.3.4:80`,
   * `[::1]`), so `address` is the trusted hop that sent it: good for accounting, but nobody
   * vouches for where the call came from, so no allow-list may admit it */
  unverified: boolean;
}

/** The client by the audit's rule: the peer, or, when the peer is in TRUSTED_PROXIES, the
 * nearest X-Forwarded-For hop that is not itself trusted. Untrusted peers cannot pick their
 * own address by sending the header. A hop that is not an IP address (strict dotted quad or
 * IPv6, as node:net reads them) is never the client: proxy-addr passes any text through, and
 * `127.evil` taken as the client would count against nobody and pass a prefix allow-list; the
 * trusted hop that forwarded it stands in for it. */
export function resolveClient(config: Pick<Config, 'TRUSTED_PROXIES'>, peer: string, forwardedFor: string | undefined): ResolvedClient {
  if (config.TRUSTED_PROXIES.length === 0 || forwardedFor === undefined) return { address: normalise(peer), unverified: false };
  const req = { connection: { remoteAddress: peer }, socket: { remoteAddress: peer }, headers: { 'x-forwarded-for': forwardedFor } };
  // [peer, hops nearest first ...], cut after the first untrusted one: the last is the client
  const hops = proxyaddr.all(req as never, compileTrust(config.TRUSTED_PROXIES));
  const client = hops[hops.length - 1]!;
  if (isIP(client) !== 0) return { address: normalise(client), unverified: false };
  // every hop before the client was trusted, hence parsed as an address by proxy-addr; the
  // strict check still applies, down to the socket peer (always an address)
  for (let i = hops.length - 2; i > 0; i--) {
    if (isIP(hops[i]!) !== 0) return { address: normalise(hops[i]!), unverified: true };
  }
  return { address: normalise(peer), unverified: true };
}

/** The client's address, for login throttling, verify slots and the audit line (see
 * resolveClient). */
export function clientAddress(config: Pick<Config, 'TRUSTED_PROXIES'>, peer: string, forwardedFor: string | undefined): string {
  return resolveClient(config, peer, forwardedFor).address;
}

/** The client's address for an allow-list, or null when the forwarded address could not be
 * verified (see ResolvedClient.unverified): such a call matches no allow-list. */
export function allowListAddress(config: Pick<Config, 'TRUSTED_PROXIES'>, peer: string, forwardedFor: string | undefined): string | null {
  const c = resolveClient(config, peer, forwardedFor);
  return c.unverified ? null : c.address;
}

function normalise(a: string): string {
  // lower case first: a forwarded `::FFFF:1.2.3.4` is the IPv4 client too, not a /64 of its own
  const lower = a.toLowerCase();
  return lower.startsWith('::ffff:') && lower.includes('.') ? lower.slice(7) : lower;
}
