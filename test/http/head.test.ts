import net from 'node:net';
import http from 'node:http';
import t from 'tap';
import { startApi } from '../helpers/api.ts';

// HEAD is answered by the GET route's handler, with the GET answer's status, headers and
// Content-Length and no content (RFC 9110 9.3.2). The body used to be written anyway: a
// keep-alive client then read it as the start of the next answer (Node's parser failed with
// HPE_INVALID_CONSTANT), and load balancers probe health with HEAD. In process, the service's
// own app (test/helpers/api.ts).

/** HEAD then GET of `path` on one connection, one after the other: everything the server wrote. */
function headThenGet(port: number, path: string, headers = ''): Promise<{ head: string; rest: string }> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1');
    let data = '';
    let head: string | null = null;
    c.on('error', reject);
    c.on('data', (d) => {
      data += d;
      if (head === null) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = data.slice(0, end + 4);
        data = data.slice(end + 4);
        // the HEAD answer is complete at its blank line: what follows must be the GET's
        c.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
      }
      const m = /\r\ncontent-length: (\d+)\r\n/i.exec(data);
      const end = data.indexOf('\r\n\r\n');
      if (m && end >= 0 && data.length >= end + 4 + Number(m[1])) {
        c.end();
        resolve({ head, rest: data });
      } else if (head !== null && data.length > 0 && !data.startsWith('HTTP/1.1 ')) {
        c.end();
        resolve({ head, rest: data });
      }
    });
    c.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\n`);
  });
}

t.test('HEAD: the GET answer\'s status, headers and length, no content; the connection goes on', async (t) => {
  const s = await startApi();
  t.teardown(() => s.stop());
  const made = await s.cli(['token', 'create', '--name', 'head', '--grant', 'rgb_liveness:5:day']);
  const token = made.json.token as string;
  for (const [path, headers] of [['/health/live', ''], ['/v1/me', `Authorization: Bearer ${token}\r\n`], ['/openapi.json', ''], ['/nowhere', '']] as const) {
    const { head, rest } = await headThenGet(s.port, path, headers);
    t.match(rest, /^HTTP\/1\.1 /, `${path}: the next bytes on the connection are the GET's answer, not a body`);
    const length = /\r\ncontent-length: (\d+)\r\n/i.exec(head)?.[1];
    const getBody = rest.slice(rest.indexOf('\r\n\r\n') + 4);
    t.equal(Number(length), Buffer.byteLength(getBody), `${path}: HEAD's Content-Length is the GET body's`);
    t.equal(head.split('\r\n')[0], rest.split('\r\n')[0], `${path}: the same status`);
    t.match(head, /\r\ncontent-type: application\/json/i);
  }

  // Node's own client, keep-alive: HEAD, then GET on the same socket
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const ask = (method: string) => new Promise<{ status: number; body: string; socket: unknown }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, path: '/health/live', method, agent }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body, socket: req.socket }));
    });
    req.on('error', reject);
    req.end();
  });
  const h = await ask('HEAD');
  const g = await ask('GET');
  t.same([h.status, h.body], [200, ''], 'HEAD: 200, no body');
  t.same([g.status, JSON.parse(g.body)], [200, { status: 'live' }], 'GET after it on the kept-alive connection');
  t.equal(g.socket, h.socket, 'one connection');
});
