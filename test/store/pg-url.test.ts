import net from 'node:net';
import t from 'tap';
import { parseDatabaseUrl, hostUrl } from '../../src/config/database-url.ts';
import { ConfigError, loadConfig } from '../../src/config/index.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { runCli, tempDir } from '../helpers/server.ts';

// Issue 40 item 7: a DATABASE_URL that matches ^postgres(ql)?:// but does not parse crashed the
// server and the CLI and printed its password. Issue 44: DATABASE_URL may name several hosts.

const SECRET = 'Sup3r-Secret-Pw';
const BAD = [
  [`postgres://lv:${SECRET}@db.example:99999/lv`, /port "99999" is not a port number/],
  [`postgres://lv:${SECRET}@[zz]:5432/lv`, /host \[zz\] is not a valid IPv6 address/],
  [`postgres://lv:${SECRET}@`, /names no host after the @/],
  [`postgres://lv:${SECRET}@a:5432,b:5432/lv?target_session_attrs=standby`, /target_session_attrs=standby cannot serve/],
  [`postgres://lv:${SECRET}@a,b,c/lv?port=1,2`, /names 3 hosts but 2 ports/],
  [`host=a,b port=5432 dbname=lv user=lv password='${SECRET}' port=0`, /port "0" is not a port number/],
  // an unencoded ? in the password: the part before it would read as a port and be quoted
  [`postgres://lv:${SECRET}?x@db.example/lv`, /a \? in the user name or password must be written %3F/],
] as const;

// The server's refusal, in process: main() reads its configuration with loadConfig, which parses
// the whole DATABASE_URL, and writes a ConfigError's message alone to stderr and exits 2
// (src/main.ts configOrExit). That exit path, for every ConfigError, is a real refused start in
// test/http/tls.test.ts (issue 43: seven refused server starts fewer here).
t.test('the server refuses each malformed URL with its reason, the password redacted (a ConfigError: exit 2)', async (t) => {
  for (const [url, reason] of BAD) {
    const e = (() => {
      try {
        loadConfig({ DATABASE_URL: url, HOST: '127.0.0.1', PORT: '0' });
      } catch (err) {
        return err as Error;
      }
      return null;
    })();
    t.ok(e instanceof ConfigError, `${reason}: a ConfigError, which main() prints alone and exits 2 with`);
    const message = e?.message ?? '';
    t.match(message, /DATABASE_URL: /, 'names the variable');
    t.match(message, reason, 'says what is wrong');
    t.notOk(message.includes(SECRET), 'the password is not printed');
    t.match(message, /\[redacted\]/, 'the URL is shown with its password redacted');
  }
});

t.test('the CLI refuses them the same way', async (t) => {
  const dataDir = tempDir();
  for (const [url, reason] of BAD.slice(0, 3)) {
    const r = await runCli(dataDir, ['db', 'migrate'], '', { DATABASE_URL: url });
    t.equal(r.code, 2, `${reason}: exit 2 (usage: the configuration)`);
    t.match(r.stderr, reason);
    t.notOk(r.stdout.includes(SECRET) || r.stderr.includes(SECRET), 'the password is not printed');
    t.notMatch(r.stderr, /TypeError|\n\s+at /, 'no stack trace');
  }
});

t.test('parsing: several hosts, per-host ports, IPv6, keyword form, parameters kept for pg', async (t) => {
  const a = parseDatabaseUrl('postgres://u:p%40ss@a:5432,[::1]:5433,c/lv?target_session_attrs=read-write&sslmode=disable');
  t.same(a.hosts, [{ host: 'a', port: 5432 }, { host: '::1', port: 5433 }, { host: 'c', port: 5432 }]);
  t.equal(a.password, 'p@ss');
  t.equal(a.checkWritable, true);
  t.same(a.params, [['sslmode', 'disable']], 'target_session_attrs is the service\'s own; the rest goes to pg');
  t.equal(hostUrl(a, a.hosts[1]!), 'postgres://u:p%40ss@[::1]:5433/lv?sslmode=disable');
  const k = parseDatabaseUrl(`host=a,b port=5432,5433 dbname=lv user=lv password='it\\'s' application_name=x`);
  t.same(k.hosts, [{ host: 'a', port: 5432 }, { host: 'b', port: 5433 }]);
  t.equal(k.password, 'it\'s');
  t.same(k.params, [['application_name', 'x']]);
  t.equal(k.checkWritable, true, 'several hosts: the writable one is looked for, whatever target_session_attrs says');
  const one = parseDatabaseUrl('postgres://u:p/w@h/db');
  t.same(one.hosts, [{ host: 'h', port: 5432 }]);
  t.equal(one.password, 'p/w', 'an unencoded / in the password');
  t.equal(one.checkWritable, false, 'one host, no target_session_attrs: used as it is, no extra round trip');
  t.equal(parseDatabaseUrl('postgres://h/db?target_session_attrs=primary').checkWritable, true);
  const s = parseDatabaseUrl('postgres://u@/lv?host=/var/run/postgresql');
  t.same(s.hosts, [{ host: '/var/run/postgresql', port: 5432 }], 'a socket folder');
  t.equal(loadConfig({ DATABASE_URL: 'host=db1,db2 dbname=lv user=lv' }).DATABASE_URL, 'host=db1,db2 dbname=lv user=lv', 'the keyword form passes the configuration');
});

/** a port on which nothing listens: refused at once, like a dead primary's */
async function deadPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

t.test('a real database as the second host of the list: the CLI finds it', async (t) => {
  const pg = await startPostgres();
  t.teardown(() => pg.stop());
  const u = new URL(pg.url);
  const dead = await deadPort();
  const multi = `postgres://${u.username}:${u.password}@127.0.0.1:${dead},127.0.0.1:${u.port}${u.pathname}?target_session_attrs=read-write`;
  const r = await runCli(tempDir(), ['db', 'migrate'], '', { DATABASE_URL: multi });
  t.equal(r.code, 0, r.stderr);
  t.equal((r.json as { store?: string }).store, 'postgres');
  // every host refusing: exit 5 (store unavailable), naming each host and why, no password
  const none = `postgres://${u.username}:${u.password}@127.0.0.1:${dead},127.0.0.1:${await deadPort()}${u.pathname}`;
  const r2 = await runCli(tempDir(), ['db', 'migrate'], '', { DATABASE_URL: none });
  t.equal(r2.code, 5, 'store unavailable');
  t.match(r2.stderr, new RegExp(`no writable PostgreSQL host: 127\\.0\\.0\\.1:${dead} does not answer`));
  t.notOk(r2.stderr.includes(u.password), 'the password is not printed');
});
