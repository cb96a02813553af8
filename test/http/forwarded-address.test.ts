// X-Forwarded-For values that are not IP addresses (security issue 29, XFF item): from a
// trusted proxy, `127.evil` was taken as the client address, opened /metrics (a prefix
// allow-list) and reached the audit. A hop that is not an address is never the client: the
// trusted hop that forwarded it stands in for accounting, and it matches no allow-list.

import t from 'tap';
import { allowListAddress, clientAddress, resolveClient } from '../../src/http/client-address.ts';
import { loadConfig } from '../../src/config/index.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';
import { auditOf, body, post, smallSingle } from '../helpers/ingest.ts';

const NOT_ADDRESSES = ['127.evil', '127.0.0.1.evil', 'localhost', '127.1', '127.000.0.1', '0x7f.0.0.1', '1.2.3.4:80', '[::1]', '::1::', 'unknown'];

t.test('a forwarded value that is not an IP address is never the client address', async (t) => {
  const c = loadConfig({ TRUSTED_PROXIES: '10.0.0.1,10.0.0.2' });
  for (const bad of NOT_ADDRESSES) {
    const r = resolveClient(c, '10.0.0.1', bad);
    t.same(r, { address: '10.0.0.1', unverified: true }, `${JSON.stringify(bad)} alone: the proxy stands in, unverified`);
    t.equal(allowListAddress(c, '10.0.0.1', bad), null, `${JSON.stringify(bad)} matches no allow-list`);
    // behind two trusted proxies the nearer one forwarded it
    t.equal(clientAddress(c, '10.0.0.1', `${bad}, 10.0.0.2`), '10.0.0.2', `${JSON.stringify(bad)} behind two proxies: the hop that forwarded it`);
    // spoofed hops left of it are not believed either
    t.equal(clientAddress(c, '10.0.0.1', `198.51.100.7, ${bad}`), '10.0.0.1', `${JSON.stringify(bad)}: the hop left of it is not believed`);
  }
  t.same(resolveClient(c, '10.0.0.1', '198.51.100.7'), { address: '198.51.100.7', unverified: false }, 'a real address is the client');
  t.equal(allowListAddress(c, '10.0.0.1', '2001:DB8::1'), '2001:db8::1', 'IPv6 is an address (normalised)');
  t.equal(allowListAddress(c, '10.0.0.1', undefined), '10.0.0.1', 'no header: the proxy itself, verified');
  t.equal(allowListAddress(loadConfig({}), '203.0.113.5', '127.evil'), '203.0.113.5', 'no trusted proxies: the header is ignored');
});

// the service's app and engine in process (test/helpers/api.ts; was one server start)
t.test('through the service\'s app: /metrics and the audit with a forwarded non-address', async (t) => {
  const server = await startApi({ engine: 'real', ready: true, env: { WORKERS: '1', TRUSTED_PROXIES: '127.0.0.1' } });
  t.teardown(() => server.stop());
  const metrics = async (xff?: string) => {
    const r = await fetch(`${server.baseUrl}/metrics`, { headers: xff === undefined ? {} : { 'x-forwarded-for': xff } });
    return { status: r.status, text: await r.text() };
  };
  t.equal((await metrics()).status, 200, 'the local scraper is served');
  t.equal((await metrics('127.0.0.1')).status, 200, 'a loopback client through the proxy is served');
  for (const bad of ['127.evil', '127.0.0.1.evil', '127.1', '::1::']) {
    const r = await metrics(bad);
    t.equal(r.status, 404, `X-Forwarded-For ${bad}: no metrics`);
    t.notMatch(r.text, /lv_http_requests_total/);
  }

  const tok = await makeToken(server, ['rgb_liveness:100:day']);
  const r = await post(server.baseUrl, tok.token, body([smallSingle()]), { headers: { 'x-forwarded-for': '127.evil' } });
  t.equal(r.status, 200, 'the call itself is served');
  const audit = await auditOf(server, r.requestId!);
  t.equal(audit?.client_ip, '127.0.0.1', 'the audit names the proxy that forwarded the non-address, not the text');
  t.equal((await fetch(`${server.baseUrl}/health/live`)).status, 200, 'the service is still up');
});
