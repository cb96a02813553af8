// Serves the example capture page on its own origin: index.html, app.js, style.css and
// client.js, the client package bundled for browsers by esbuild from client/src.
//   node examples/capture/serve.mjs [--port 5173] [--host 127.0.0.1]
// then start the service with CORS_ORIGINS=http://127.0.0.1:5173 and open
//   http://127.0.0.1:5173/?service=http://127.0.0.1:8080
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CLIENT_ENTRY = path.join(HERE, '../../client/src/index.ts');
const FILES = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/index.html': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
};

/** The client package as one browser ES module. */
export async function bundleClient() {
  const out = await esbuild.build({
    entryPoints: [CLIENT_ENTRY], bundle: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, minify: false,
  });
  return out.outputFiles[0].text;
}

export async function startExampleServer({ port = 0, host = '127.0.0.1' } = {}) {
  const client = await bundleClient();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
      return;
    }
    if (url.pathname === '/client.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-store' }).end(client);
      return;
    }
    const file = FILES[url.pathname];
    if (!file) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': file[1], 'cache-control': 'no-store' }).end(fs.readFileSync(path.join(HERE, file[0])));
  });
  await new Promise((resolve) => server.listen(port, host, resolve));
  const { port: actual } = server.address();
  return { server, port: actual, url: `http://${host}:${actual}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name, def) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : def;
  };
  const { url } = await startExampleServer({ port: Number(arg('--port', '5173')), host: arg('--host', '127.0.0.1') });
  console.log(`example capture page at ${url}/?service=http://127.0.0.1:8080 (start the service with CORS_ORIGINS=${url})`);
}
