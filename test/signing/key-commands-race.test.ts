import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import t, { type Test } from 'tap';
import { ensureSigningKey, listKeys, publicJwks, revokeSigningKey, rotateSigningKey } from '../../src/signing/index.ts';
import { FOREIGN_KEYS_LOCK_MS, setKeysLockHook, takeKeysLock } from '../../src/signing/keys.ts';
import { currentProcess, processStartTime, type ProcessIdentity } from '../../src/store/owner.ts';
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

/** The identity of a live process of its own (a `sleep`), for a taker this test plays. */
async function liveIdentity(t: Test): Promise<ProcessIdentity> {
  const p = spawn('sleep', ['300'], { stdio: 'ignore' });
  t.teardown(() => p.kill());
  await new Promise((r) => p.once('spawn', r));
  return { pid: p.pid!, pid_start: processStartTime(p.pid!) };
}

/** The text of a lock left by a key command that was killed (its process is gone). */
async function deadHolder(): Promise<string> {
  const p = spawn('true', { stdio: 'ignore' });
  await new Promise((r) => p.once('exit', r));
  return JSON.stringify({ pid: p.pid, pid_start: 'its start time' });
}

const holderOf = (lock: string) => (JSON.parse(fs.readFileSync(lock, 'utf8')) as ProcessIdentity).pid;

t.test('two takers that find the same lock left by a dead holder: one takes it over, the other waits for it', async (t) => {
  const dir = tempDir('keys-takeover-');
  const [a, b] = [await liveIdentity(t), await liveIdentity(t)];
  const lock = path.join(dir, 'keys.lock');
  fs.writeFileSync(lock, await deadHolder());
  // B stops where it has judged the lock stale, before it takes it over; A runs in that gap
  // (the interleaving that let both run: B then deleted A's fresh lock and wrote its own)
  let bStopped!: () => void;
  let resumeB!: () => void;
  let bWaits!: () => void;
  const stopped = new Promise<void>((r) => (bStopped = r));
  const gate = new Promise<void>((r) => (resumeB = r));
  const waits = new Promise<void>((r) => (bWaits = r));
  let held = false;
  setKeysLockHook(async (event, taker) => {
    if (taker !== b) return;
    if (event === 'stale' && !held) {
      held = true;
      bStopped();
      await gate;
    }
    if (event === 'waiting') bWaits();
  });
  t.teardown(() => setKeysLockHook(null));
  const bTakes = takeKeysLock(dir, b);
  const bState = settledState(bTakes);
  await stopped;
  const releaseA = await takeKeysLock(dir, a);
  t.equal(holderOf(lock), a.pid, 'A took the dead holder\'s lock over');
  resumeB();
  await Promise.race([waits, bTakes]);
  t.equal(bState.settled, false, 'B, which had judged the same lock stale, waits for A instead of taking the lock too');
  t.equal(holderOf(lock), a.pid, 'A\'s lock is in place');
  releaseA();
  const releaseB = await bTakes;
  t.equal(holderOf(lock), b.pid, 'B took it once A let go');
  releaseB();
  t.same(fs.readdirSync(dir), [], 'nothing left beside: no lock, no takeover or temporary file');
});

t.test('a lock is let go only by its own taker', async (t) => {
  const dir = tempDir('keys-release-');
  const lock = path.join(dir, 'keys.lock');
  const release = await takeKeysLock(dir, await liveIdentity(t));
  // whatever replaced it (a taker that judged it stale, a hand): not this taker's to remove
  const other = JSON.stringify(await liveIdentity(t));
  fs.writeFileSync(lock, other);
  release();
  t.equal(fs.readFileSync(lock, 'utf8'), other, 'a lock that is not the taker\'s own stays');
});

t.test('a takeover left by a taker killed in the middle of it is taken over in turn', async (t) => {
  const dir = tempDir('keys-takeover-killed-');
  const lock = path.join(dir, 'keys.lock');
  const stale = await deadHolder();
  fs.writeFileSync(lock, stale);
  // the takeover file removeStale names for that lock's text, made by a taker that is gone
  fs.writeFileSync(`${lock}.${createHash('sha256').update(stale).digest('base64url').slice(0, 12)}.takeover`, await deadHolder());
  const me = await liveIdentity(t);
  const release = await takeKeysLock(dir, me);
  t.equal(holderOf(lock), me.pid, 'taken');
  release();
  t.same(fs.readdirSync(dir), [], 'both files of the dead are gone');
});

t.test('a takeover under way by a live taker is left to it', async (t) => {
  const dir = tempDir('keys-takeover-live-');
  const lock = path.join(dir, 'keys.lock');
  const stale = await deadHolder();
  fs.writeFileSync(lock, stale);
  const marker = `${lock}.${createHash('sha256').update(stale).digest('base64url').slice(0, 12)}.takeover`;
  fs.writeFileSync(marker, JSON.stringify(await liveIdentity(t)));
  const me = await liveIdentity(t);
  let looked!: () => void;
  const lookedTwice = new Promise<void>((r) => (looked = r));
  let stale_ = 0;
  setKeysLockHook((event, taker) => {
    if (taker === me && event === 'stale' && ++stale_ === 2) looked();
  });
  t.teardown(() => setKeysLockHook(null));
  const taking = takeKeysLock(dir, me);
  const state = settledState(taking);
  await Promise.race([lookedTwice, taking]);
  t.equal(state.settled, false, 'waits');
  t.equal(fs.readFileSync(lock, 'utf8'), stale, 'the lock is left to the live taker');
  fs.rmSync(lock); // that taker finished
  fs.rmSync(marker);
  (await taking)();
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
  // what the rotation makes of the lock at its first look: held (it waits) or stale
  const judged = new Promise<string>((r) => setKeysLockHook((event) => r(event)));
  t.teardown(() => setKeysLockHook(null));
  const rotation = rotateSigningKey(dir);
  const state = settledState(rotation);
  t.equal(await judged, 'waiting', 'the rotation finds the lock held');
  setKeysLockHook(null);
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
