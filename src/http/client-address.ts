import type { Config } from '../config/index.ts';

/** The client's address, for login throttling and the audit line: the peer, or, when the
 * peer is one of TRUSTED_PROXIES, the nearest X-Forwarded-For hop that is not itself a
 * trusted proxy. Untrusted peers cannot pick their own address by sending the header. */
export function clientAddress(config: Pick<Config, 'TRUSTED_PROXIES'>, peer: string, forwardedFor: string | undefined): string {
  const trusted = new Set(config.TRUSTED_PROXIES.map(normalise));
  let address = normalise(peer);
  if (!trusted.has(address) || !forwardedFor) return address;
  const hops = forwardedFor.split(',').map((h) => normalise(h.trim())).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    address = hops[i]!;
    if (!trusted.has(address)) break;
  }
  return address;
}

function normalise(a: string): string {
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a.toLowerCase();
}
