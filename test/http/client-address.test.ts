import t from 'tap';
import { clientAddress, compileTrust } from '../../src/http/client-address.ts';
import { loadConfig } from '../../src/config/index.ts';

t.test('X-Forwarded-For counts only behind a trusted proxy', async (t) => {
  const plain = loadConfig({});
  t.equal(clientAddress(plain, '203.0.113.5', '198.51.100.1'), '203.0.113.5', 'an untrusted peer cannot choose its address');
  const proxied = loadConfig({ TRUSTED_PROXIES: '10.0.0.1,10.0.0.2' });
  t.equal(clientAddress(proxied, '10.0.0.1', '198.51.100.1, 10.0.0.2'), '198.51.100.1', 'nearest untrusted hop');
  t.equal(clientAddress(proxied, '10.0.0.1', 'spoofed, 198.51.100.7'), '198.51.100.7', 'hops left of the first untrusted one are ignored');
  t.equal(clientAddress(proxied, '::ffff:10.0.0.1', undefined), '10.0.0.1');
  t.equal(clientAddress(proxied, '10.0.0.1', '::FFFF:198.51.100.9'), '198.51.100.9', 'an IPv4-mapped forwarded address in upper case is the IPv4 client');
});

t.test('TRUSTED_PROXIES takes CIDR ranges, IPv4 and IPv6', async (t) => {
  const c = loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 2001:db8:ffff::/48' });
  t.equal(clientAddress(c, '10.20.30.40', '198.51.100.1'), '198.51.100.1', 'v4 peer inside the range');
  t.equal(clientAddress(c, '::ffff:10.1.2.3', '198.51.100.2'), '198.51.100.2', 'IPv4-mapped peer inside the v4 range');
  t.equal(clientAddress(c, '11.0.0.1', '198.51.100.1'), '11.0.0.1', 'v4 peer outside the range is the client');
  t.equal(clientAddress(c, '2001:db8:ffff:1::9', '2001:db8:1::5'), '2001:db8:1::5', 'v6 peer inside the range');
  t.equal(clientAddress(c, '2001:db8:fffe::9', '2001:db8:1::5'), '2001:db8:fffe::9', 'v6 peer outside the range');
  t.equal(clientAddress(c, '10.0.0.1', '203.0.113.9, 10.9.9.9, 10.0.0.7'), '203.0.113.9', 'hops inside the range are skipped');
  t.equal(clientAddress(c, '10.0.0.1', 'spoofed, 203.0.113.9'), '203.0.113.9', 'hops left of the first untrusted one are ignored');
  t.equal(clientAddress(c, '10.0.0.1', undefined), '10.0.0.1', 'no header: the proxy itself');
});

// Each bad entry against what main() runs on TRUSTED_PROXIES (compileTrust), in process; one
// goes through a real start for main()'s wrapping of the refusal (the variable named, exit 2)
// (issue 43: two refused server starts fewer).
t.test('a bad TRUSTED_PROXIES entry refuses to start, naming the variable', async (t) => {
  for (const bad of ['10.0.0.0/33', 'not-an-address', '2001:db8::/129']) {
    t.throws(() => compileTrust(loadConfig({ TRUSTED_PROXIES: bad }).TRUSTED_PROXIES), `${bad} refused by compileTrust`);
  }
  t.doesNotThrow(() => compileTrust(loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, 2001:db8:ffff::/48' }).TRUSTED_PROXIES), 'a good list is not');
  const { runServiceToExit } = await import('../helpers/server.ts');
  const r = await runServiceToExit({ TRUSTED_PROXIES: 'not-an-address' });
  t.equal(r.code, 2, 'the real start refused: exit 2');
  t.match(r.out, /TRUSTED_PROXIES: /, 'its message names the variable');
  t.notMatch(r.out, /\n\s+at /, 'no stack trace');
});
