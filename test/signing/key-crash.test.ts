import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { ensureSigningKey, listKeys, publicJwks, revokeSigningKey, rotateSigningKey, RETIRED_PUBLISH_MS } from '../../src/signing/index.ts';
import { ROOT, runChild, tempDir } from '../helpers/server.ts';

// A key command killed (kill -9, the OOM killer, a power loss) between two of its writes: after
// `current` names the new key, before the key it replaced is rewritten as retired (or revoked).
// That key was left neither current nor retired: published, its private part kept, for ever
// (rotations retired only the current key, and deleted only retired ones).

const DAY = 86_400_000;
const currentOf = (dir: string) => fs.readFileSync(path.join(dir, 'keys', 'current'), 'utf8');

/** `keys rotate` (or `keys revoke <kid>`) in a process of its own, killed with SIGKILL just
 * before it rewrites the file of `kid`. */
async function killedBefore(t: Test, dir: string, kid: string, what: 'rotate' | 'revoke') {
  const script = [
    "import fs from 'node:fs';",
    "import { revokeSigningKey, rotateSigningKey } from './src/signing/keys.ts';",
    `const [dir, kid, what] = ${JSON.stringify([dir, kid, what])};`,
    "const target = dir + '/keys/' + kid + '.json';",
    'const rename = fs.renameSync;',
    "fs.renameSync = (from, to) => { if (to === target) process.kill(process.pid, 'SIGKILL'); return rename(from, to); };",
    "await (what === 'rotate' ? rotateSigningKey(dir) : revokeSigningKey(dir, kid, 'test'));",
  ].join('\n');
  const r = await runChild(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, limitMs: 120_000 });
  t.equal(r.signal, 'SIGKILL', `killed mid-way ${r.stderr}`);
  t.not(currentOf(dir), kid, 'it had made a new key current');
  t.equal(listKeys(dir).find((k) => k.kid === kid)!.retired_at, null, 'and left the key it replaced unretired');
  t.ok(fs.existsSync(path.join(dir, 'keys.lock')), 'and its lock behind');
}

/** Every key but the current one is retired or revoked: long after, only the current key is
 * published, and no private part but the current key's outlives the deletion. */
function tidy(t: Test, dir: string, at: number) {
  const current = currentOf(dir);
  for (const k of listKeys(dir)) if (k.kid !== current) t.ok(k.retired_at !== null || k.revoked_at, `${k.kid.slice(0, 8)}: retired or revoked`);
  t.same(publicJwks(dir, at + RETIRED_PUBLISH_MS).keys.map((k) => k.kid), [current], 'once the publication of retired keys ran out, only the current key is published');
}

t.test('a rotation killed before it retired the old key: the next rotation retires it, and it is deleted in time', async (t) => {
  const dir = tempDir('keys-crash-rotate-');
  const first = (await ensureSigningKey(dir)).kid;
  await killedBefore(t, dir, first, 'rotate');
  const at = Date.now();
  const again = await rotateSigningKey(dir, at);
  t.not(again.kid, first);
  t.equal(listKeys(dir).find((k) => k.kid === first)!.retired_at, new Date(at).toISOString(), 'the key the killed rotation replaced is retired by the next');
  tidy(t, dir, at);
  const later = await rotateSigningKey(dir, at + 31 * DAY);
  t.ok(later.deleted.includes(first), 'and deleted with the keys retired with it');
  t.notOk(listKeys(dir).some((k) => k.kid === first), 'its private part is gone');
});

t.test('a revocation killed before it recorded the revocation: run again, it finishes; a rotation meanwhile retires the key', async (t) => {
  const dir = tempDir('keys-crash-revoke-');
  const leaked = (await ensureSigningKey(dir)).kid;
  await killedBefore(t, dir, leaked, 'revoke');
  const replacement = currentOf(dir);
  const at = Date.now();
  await rotateSigningKey(dir, at);
  t.ok(listKeys(dir).find((k) => k.kid === leaked)!.retired_at, 'the rotation retired the leaked key (published 7 days at most)');
  tidy(t, dir, at);
  const r = await revokeSigningKey(dir, leaked, 'test, again');
  t.match(r, { kid: leaked, already_revoked: false, revoked_by: 'test, again' }, 'the revocation run again records it');
  const record = listKeys(dir).find((k) => k.kid === leaked)!;
  t.notOk('d' in record.jwk, 'no private part');
  t.notOk(publicJwks(dir).keys.some((k) => k.kid === leaked), 'unpublished');
  t.ok(listKeys(dir).find((k) => k.kid === replacement)!.retired_at, 'the key the killed revocation made was retired by the rotation like any other');
});
