import t from 'tap';
import { clientAddress } from '../../src/http/client-address.ts';
import { loadConfig } from '../../src/config/index.ts';

t.test('X-Forwarded-For counts only behind a trusted proxy', async (t) => {
  const plain = loadConfig({});
  t.equal(clientAddress(plain, '203.0.113.5', '198.51.100.1'), '203.0.113.5', 'an untrusted peer cannot choose its address');
  const proxied = loadConfig({ TRUSTED_PROXIES: '10.0.0.1,10.0.0.2' });
  t.equal(clientAddress(proxied, '10.0.0.1', '198.51.100.1, 10.0.0.2'), '198.51.100.1', 'nearest untrusted hop');
  t.equal(clientAddress(proxied, '10.0.0.1', 'spoofed, 198.51.100.7'), '198.51.100.7', 'hops left of the first untrusted one are ignored');
  t.equal(clientAddress(proxied, '::ffff:10.0.0.1', undefined), '10.0.0.1');
});
