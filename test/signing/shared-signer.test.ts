import t from 'tap';
import { decodeProtectedHeader } from 'jose';
import { newKey, type KeyFile } from '../../src/signing/keys.ts';
import { SharedSigner, type KeySource } from '../../src/signing/index.ts';

// The signer of nodes on the shared database, against a key source the test controls; a
// cache time of 0 makes every call ask the source, so no waiting is needed.
function source(): KeySource & { key: KeyFile | Error; asked: number } {
  const s = {
    key: new Error('unset') as KeyFile | Error,
    asked: 0,
    async current() {
      s.asked++;
      if (s.key instanceof Error) throw s.key;
      return s.key;
    },
    list: async () => [],
    rotate: async () => ({ kid: '', retired: null, deleted: [] }),
    revoke: async () => ({ kid: '', revoked_at: '', revoked_by: null, current: null, already_revoked: false }),
    prune: async () => [],
  };
  return s;
}
const kidOf = async (signer: SharedSigner) => decodeProtectedHeader(await signer.sign('{}')).kid;

t.test('follows the source; keeps its key while the source fails; fails when it never had one', async (t) => {
  const src = source();
  const signer = new SharedSigner(src, 0);
  await t.rejects(signer.sign('{}'), /unset/, 'no key ever read: signing fails (the route then answers unsigned and logs)');
  const a = await newKey(Date.now());
  src.key = a;
  t.equal(await kidOf(signer), a.kid);
  src.key = new Error('database away');
  t.equal(await kidOf(signer), a.kid, 'the database away: still signs with the key it has');
  const b = await newKey(Date.now());
  src.key = b;
  t.equal(await kidOf(signer), b.kid, 'a rotation is picked up once the source answers');
});

t.test('within the cache time the source is not asked again', async (t) => {
  const src = source();
  src.key = await newKey(Date.now());
  const signer = new SharedSigner(src, 60_000);
  await Promise.all([1, 2, 3, 4].map(() => signer.sign('{}')));
  await signer.sign('{}');
  t.equal(src.asked, 1);
});
