import { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/observability/index.ts';
import { startServer } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Log lines carry text a caller chose. pino escapes what JSON requires (C0 controls, quotes,
// backslashes) and nothing else: C1 controls (U+009B is a terminal's CSI, U+0085 a line break
// to some readers) and bidi overrides and isolates (U+202E, U+2066: "nimda" shown as "admin")
// went into the line raw, for the terminal or viewer an operator reads it with. Every line is
// now made printable (src/printable.ts): those characters are \uXXXX escapes, the JSON the same.

const HOSTILE = ['\u202e', '\u2066', '\u2067', '\u009b', '\u0085', '\u2028', '\u2029', '\u061c', '\u007f', '\u200f'];
const rawIn = (line: string) => HOSTILE.filter((c) => line.includes(c)).map((c) => `U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

t.test('a failed login: the username is in its log line escaped, and reads back the same', async (t) => {
  const s = await startServer({ env: { WORKERS: '1' } });
  t.teardown(() => s.stop());
  const username = 'alice\u202e nimda:resu \u2066\u009b31m\u0085x\u061c\u007f\u200f';
  const r = await fetch(`${s.baseUrl}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password: 'whatever1' }) });
  t.equal(r.status, 401);
  const id = r.headers.get('x-request-id');
  const line = await waitFor(() => s.logs.flatMap((c) => c.split('\n')).find((l) => l.includes('"login failed"') && l.includes(String(id))), { what: 'the login failed line' });
  t.same(rawIn(line), [], 'no bidi mark or C1 control raw in the line');
  t.match(line, /alice\\u202e nimda:resu \\u2066\\u009b31m\\u0085x\\u061c\\u007f\\u200f/, 'each one a \\u escape');
  t.equal(JSON.parse(line).username, username, 'the same username to whatever parses the line');
});

t.test('any field of any line: a token name, a part name, an error message', async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const log = createLogger('info', { worker: 0 }, sink);
  const name = 'shop\u202egnp.exe';
  // U+2028 and U+2029 split a line for readers that take Unicode's line breaks (Python's splitlines)
  log.info({ token_name: name, part: { name: `f\u2067${name}` }, err: { message: `no part \u009b2J${name}\u2028x` } }, `created \u0085${name}\u2029`);
  await waitFor(() => lines.length === 1, { what: 'the line' });
  t.same(rawIn(lines[0]!), [], 'nothing raw');
  const parsed = JSON.parse(lines[0]!);
  t.equal(parsed.token_name, name);
  t.equal(parsed.part.name, `f\u2067${name}`);
  t.equal(parsed.err.message, `no part \u009b2J${name}\u2028x`);
  t.equal(parsed.msg, `created \u0085${name}\u2029`);
});
