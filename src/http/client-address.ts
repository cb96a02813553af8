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

/** The client's address, for login throttling and the audit line: the peer, or, when the
 * peer is in TRUSTED_PROXIES, the nearest X-Forwarded-For hop that is not itself trusted.
 * Untrusted peers cannot pick their own address by sending the header. */
export function clientAddress(config: Pick<Config, 'TRUSTED_PROXIES'>, peer: string, forwardedFor: string | undefined): string {
  if (config.TRUSTED_PROXIES.length === 0) return normalise(peer);
  const req = { connection: { remoteAddress: peer }, socket: { remoteAddress: peer }, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } };
  return normalise(proxyaddr(req as never, compileTrust(config.TRUSTED_PROXIES)));
}

function normalise(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a.toLowerCase();
}
