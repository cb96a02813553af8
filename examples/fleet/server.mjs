// A fleet's backend, as small as it gets (no framework): it holds the business token, mints a
// device session per visit, serves the page and the capture component, and after the capture
// reads the result from the service itself (server to server), which is what it decides on;
// the page's own claim is never trusted.
//
// What this example leaves to you: it mints a session for every page load, with no login of
// its own. Anyone who can load the page gets a session token worth max_captures units of the
// business token's quota, and a script loading it in a loop spends the token's mint limit
// (SESSION_MINT_LIMIT a minute) for every real visitor. Your backend mints a session only for
// a visitor it has authenticated (its own login, its own rate limit per account).
//   LIVENESS_TOKEN=lvk_... node examples/fleet/server.mjs [--service http://127.0.0.1:8080] [--port 5180]
// The service must list this page's origin in CORS_ORIGINS (the start line prints it). Open
//   http://127.0.0.1:5180/?mode=rgb_single      (or rgb_sequence, color; &autostart=1 starts at once)
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { buildCapture } from '../../capture/build.mjs';
import { createSession, getSession, revokeSession } from '../../client/src/index.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MODULE_OF = { rgb_single: 'rgb_liveness', rgb_sequence: 'rgb_liveness', color: 'color_liveness' };
const SESSION_TTL_S = 600;
const TYPES = { '.js': 'text/javascript; charset=utf-8', '.json': 'application/json', '.bin': 'application/octet-stream', '.wasm': 'application/wasm', '.txt': 'text/plain' };

export async function startFleetExample({ serviceUrl, businessToken, port = 0, host = '127.0.0.1' }) {
  const service = { baseUrl: serviceUrl, token: businessToken };
  const { files: component } = await buildCapture();
  const page = fs.readFileSync(path.join(HERE, 'index.html'), 'utf8');
  // visit id -> the session this backend minted for it: the page names its visit, never a session
  const visits = new Map();

  const send = (res, status, type, body) => res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => send(res, 500, 'text/plain', `example backend error: ${e.message}`));
  });
  async function handle(req, res) {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/') {
      // own keys only: ?mode=toString found Object.prototype's, and the mint failed 422
      const asked = url.searchParams.get('mode');
      const mode = asked !== null && Object.hasOwn(MODULE_OF, asked) ? asked : 'rgb_single';
      // one session per visit: short-lived, one module, a few captures
      const minted = await createSession(service, { module_id: MODULE_OF[mode], ttl_seconds: SESSION_TTL_S, max_captures: 3 });
      if (minted.kind !== 'ok') return send(res, 502, 'text/plain', `could not mint a session: ${minted.code} ${minted.message}`);
      const visit = randomUUID();
      visits.set(visit, minted.value.session_id);
      // a visit lives as long as its session: the map does not grow with every page load
      setTimeout(() => visits.delete(visit), SESSION_TTL_S * 1000).unref();
      const config = { visit, mode, serviceUrl, sessionToken: minted.value.session_token, autostart: url.searchParams.get('autostart') === '1' };
      // JSON in a script element: '<' escaped so no value can close the element
      return send(res, 200, 'text/html; charset=utf-8', page.replace('{{CONFIG}}', JSON.stringify(config).replace(/</g, '\\u003c')));
    }
    if (req.method === 'GET' && url.pathname === '/result') {
      const sessionId = visits.get(url.searchParams.get('visit') ?? '');
      if (!sessionId) return send(res, 404, 'application/json', JSON.stringify({ error: 'unknown visit' }));
      // the decision comes from the service, server to server
      const read = await getSession(service, sessionId);
      if (read.kind !== 'ok') return send(res, 502, 'application/json', JSON.stringify({ error: read.code }));
      const s = read.value;
      // docs/sessions.md: the decision is status plus alive of each record of a completed call;
      // here the last call decides. A call still pending, refunded, held for an operator, or
      // answered retry is no verdict: live stays false, and the person may capture again.
      const last = s.results.at(-1);
      const records = last?.status === 'completed' ? (last.results ?? []) : [];
      const decided = records.length > 0 && records.every((r) => r.status === 'ok');
      const live = decided && records.every((r) => r.alive === true);
      // a verdict ends the visit: the session's unused captures are no use to anyone now
      let state = s.state;
      if (decided && state !== 'revoked') {
        const revoked = await revokeSession(service, s.session_id);
        if (revoked.kind === 'ok') state = 'revoked'; // what the page shows is the session as it now is
        else console.error(`could not revoke session ${s.session_id}: ${revoked.code}`);
      }
      return send(res, 200, 'application/json', JSON.stringify({
        session_id: s.session_id, state, live, decided,
        calls: s.results.map((r) => ({ request_id: r.request_id, status: r.status })),
        request_ids: s.results.map((r) => r.request_id),
        results: s.results.flatMap((r) => r.results ?? []),
      }));
    }
    if (req.method === 'GET' && url.pathname.startsWith('/capture/')) {
      const bytes = component.get(url.pathname.slice('/capture/'.length));
      if (!bytes) return send(res, 404, 'text/plain', 'not found');
      return send(res, 200, TYPES[path.extname(url.pathname)] ?? 'application/octet-stream', bytes);
    }
    return send(res, 404, 'text/plain', 'not found');
  }
  await new Promise((resolve) => server.listen(port, host, resolve));
  const actual = server.address().port;
  return { port: actual, url: `http://${host}:${actual}`, componentFiles: component, close: () => new Promise((r) => server.close(r)) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name, def) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : def;
  };
  const businessToken = process.env.LIVENESS_TOKEN;
  if (!businessToken) {
    console.error('set LIVENESS_TOKEN to a business token (lvk_...) with rgb_liveness and/or color_liveness grants');
    process.exit(2);
  }
  const serviceUrl = arg('--service', process.env.LIVENESS_URL ?? 'http://127.0.0.1:8080');
  const { url } = await startFleetExample({ serviceUrl, businessToken, port: Number(arg('--port', '5180')), host: arg('--host', '127.0.0.1') });
  console.log(`fleet example at ${url}/?mode=rgb_single (also rgb_sequence, color); the service at ${serviceUrl} needs CORS_ORIGINS=${url}`);
}
