import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import t, { type Test } from 'tap';
import { ensureSigningKey, listKeys, publicJwks, revokeSigningKey, rotateSigningKey } from '../../src/signing/index.ts';
import { currentProcess, processStartTime } from '../../src/store/owner.ts';
import { FOREIGN_KEYS_LOCK_MS } from '../../src/signing/keys.ts';
import { tempDir } from '../helpers/server.ts';
import { settledState } from '../helpers/wait.ts';

// Key commands read the keys and write them back: two at once (an emergency revoke during a
// scheduled rotation, two operators) used to undo each other. Rotations and revocations now run
// one at a time, in a process and across processes (a lock file naming its holder).

/** What must hold of a keys folder whatever ran: a revoked key has no private part and is not
 * published; every key but the current one is retired or revoked (none left published for ever). */
function consistent(t: Test, dir: string, revoked: string[]) {
  const keys = listKeys(dir);
  const current = fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8');
  const published = publicJwks(dir, Date.parse('2099-01-01T00:00:00Z')).keys.map((k) => k.kid);
  for (const kid of revoked) {
    const k = keys.find((x) => x.kid === kid)!;
    t.ok(k.revoked_at, `${kid.slice(0, 8)}: revoked`);
    t.notOk('d' in k.jwk, `${kid.slice(0, 8)}: no private part`);
  }
  t.same(published, [current], 'long after, only the current key is published: none was left unretired');
  t.notOk(revoked.includes(current), 'a revoked key is not current');
}

t.test('a rotation and a revocation of the current key at once: the revocation holds, no key is left unretired', async (t) => {
  const dir = tempDir('keys-race-');
  const revoked: string[] = [];
  for (let round = 0; round < 8; round++) {
    const current = (await ensureSigningKey(dir)).kid;
    await Promise.all([rotateSigningKey(dir), revokeSigningKey(dir, current, 'test'), rotateSigningKey(dir)]);
    revoked.push(current);
  }
  consistent(t, dir, revoked);
});

t.test('a key command held by another live process waits for it; one left by a process that is gone is taken over', async (t) => {
  const dir = tempDir('keys-lock-');
  await ensureSigningKey(dir);
  const holder = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.teardown(() => holder.kill());
  await new Promise((r) => holder.once('spawn', r));
  const lock = path.join(dir, 'keys.lock');
  fs.writeFileSync(lock, JSON.stringify({ pid: holder.pid, pid_start: processStartTime(holder.pid!) }));
  const rotation = rotateSigningKey(dir);
  const state = settledState(rotation);
  // the rotation is waiting: the lock file is the live holder's, and the current key unchanged
  const before = fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8');
  await new Promise((r) => setImmediate(r));
  t.equal(state.settled, false, 'waiting while the holder lives');
  t.equal(fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8'), before);
  fs.rmSync(lock); // the holder finished
  const done = await rotation;
  t.equal(done.retired, before, 'then it ran');
  t.notOk(fs.existsSync(lock), 'and let go');

  // a holder killed with its lock held
  holder.kill('SIGKILL');
  await new Promise((r) => holder.once('exit', r));
  fs.writeFileSync(lock, JSON.stringify({ pid: holder.pid, pid_start: 'its start time' }));
  const again = await rotateSigningKey(dir);
  t.equal(again.retired, done.kid, 'a lock whose holder is gone is taken over');
  t.notOk(fs.existsSync(lock));
});

// A key command in another container (another PID namespace: the server there is pid 1, and so
// may be this command) has a pid that names some other process here, or this one: its lock was
// taken over at once, and the two commands undid each other. Its pid is not judged: its lock
// counts as held until it is older than any key command lasts.
t.test('a lock of another PID namespace is waited for, and taken over only once old', async (t) => {
  const dir = tempDir('keys-lock-ns-');
  await ensureSigningKey(dir);
  const lock = path.join(dir, 'keys.lock');
  // this process's own pid (both pid 1 of their containers), of another start and namespace
  const planted = JSON.stringify({ ...currentProcess(), pid_start: '1', pid_ns: '1' });
  fs.writeFileSync(lock, planted);
  const before = fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8');
  const rotation = rotateSigningKey(dir);
  const state = settledState(rotation);
  // the rotation's first look at the lock is made before this turn of the event loop ends
  await new Promise((r) => setImmediate(r));
  t.equal(fs.readFileSync(lock, 'utf8'), planted, 'the lock is left to its holder');
  t.equal(state.settled, false, 'the rotation waits');
  t.equal(fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8'), before);
  // a holder that has held it longer than a key command takes: a killed one
  const old = new Date(Date.now() - FOREIGN_KEYS_LOCK_MS - 1000);
  fs.utimesSync(lock, old, old);
  const done = await rotation;
  t.equal(done.retired, before, 'then it is taken over, and the rotation runs');
  t.notOk(fs.existsSync(lock));
});
