import net from 'node:net';
import t from 'tap';
import { startApi, type ApiHandle } from '../helpers/api.ts';

// Security issue 29, unknown HTTP methods. The uWS build's C++ HTTP parser accepts only GET,
// HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE and CONNECT, in upper case; any other method
// (QUERY, FOO, PROPFIND, `get`) fails parsing before JavaScript sees the request, and uWS
// closes the connection: a clean FIN with no bytes written, not even answers to requests
// pipelined before it in the same read. No 405 can be sent from JavaScript for those, so this
// is a documented limitation; the test pins that exact behaviour, and that the process and
// other connections are unaffected. Known methods the route lacks get 405 with Allow.
// The parser is the binding's, the same in an API worker thread as in this process: the app is
// the service's own, in process (test/helpers/api.ts; was one server start).

interface Raw { data: string; events: string[] }

function raw(s: ApiHandle, text: string): Promise<Raw> {
  return new Promise((resolve) => {
    const c = net.connect(s.port, '127.0.0.1');
    let data = '';
    const events: string[] = [];
    c.on('data', (d) => (data += d));
    c.on('end', () => events.push('FIN'));
    c.on('error', (e: NodeJS.ErrnoException) => events.push(e.code ?? 'error'));
    c.on('close', () => resolve({ data, events }));
    c.write(text);
    // a server that answered would keep the connection alive: end our side once it has
    c.once('data', () => c.end());
  });
}

t.test('unknown methods: the parser closes the connection; known methods the route lacks: 405 with Allow', async (t) => {
  const s = await startApi();
  t.teardown(() => s.stop());

  for (const method of ['QUERY', 'FOO', 'PROPFIND', 'get']) {
    const r = await raw(s, `${method} /health/live HTTP/1.1\r\nHost: x\r\n\r\n`);
    t.same(r, { data: '', events: ['FIN'] }, `${method}: closed with FIN, nothing written`);
  }
  const pipelined = await raw(s, 'GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nFOO /health/live HTTP/1.1\r\nHost: x\r\n\r\n');
  t.same(pipelined, { data: '', events: ['FIN'] }, 'a GET pipelined before it in the same packet is not answered either');

  // a burst of them, side by side with ordinary calls
  const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => raw(s, `${i % 2 ? 'QUERY' : 'FOO'} /v1/me HTTP/1.1\r\nHost: x\r\n\r\n`)));
  t.ok(burst.every((r) => r.data === ''), 'every one closed unanswered');
  t.equal((await fetch(`${s.baseUrl}/health/live`)).status, 200, 'the service still serves');

  for (const method of ['PUT', 'DELETE', 'PATCH', 'TRACE']) {
    const r = await raw(s, `${method} /health/live HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`);
    t.match(r.data, /^HTTP\/1\.1 405 /, `${method}: 405`);
    t.match(r.data, /\r\nAllow: GET\r\n/i, `${method}: Allow names GET`);
    t.match(r.data, /"code":"method_not_allowed"/, `${method}: the documented code`);
  }
  t.equal((await fetch(`${s.baseUrl}/health/live`)).status, 200, 'the service is up');
});
