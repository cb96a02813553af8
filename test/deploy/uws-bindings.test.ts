// The uWebSockets.js build is chosen at start (issue 30): the newest that loads on this Node
// and glibc. On the Debian 12 / Node 20 hosts this suite runs on that is 20.30 (20.57 needs
// glibc 2.38); the container test shows 20.57 serving on Node 24. The installed 20.57 package
// must also be the one whose bindings were recorded (deploy/uws-bindings.sha256).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import { describeUwsBuild, loadUws, NativeBindingError, UWS_BUILDS, uwsBuild } from '../../src/http/uws.ts';
import { ROOT } from '../helpers/server.ts';

const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;
const atLeast = (v: string | undefined, want: [number, number]) => {
  const [a, b] = (v ?? '0.0').split('.').map(Number) as [number, number];
  return a > want[0] || (a === want[0] && b >= want[1]);
};

t.test('the newest build that loads here serves; the ones passed over say why', async (t) => {
  const uws = loadUws();
  t.type(uws.App, 'function');
  const chosen = uwsBuild()!;
  const at = UWS_BUILDS.findIndex((b) => b.pkg === chosen.build.package);
  t.ok(at >= 0, `${chosen.build.package} is a known build`);
  t.same(chosen.skipped.map((s) => s.package), UWS_BUILDS.slice(0, at).map((b) => b.pkg), 'exactly the newer builds were skipped');
  t.equal(chosen.build.binding, `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`);
  t.equal(describeUwsBuild(), `${chosen.build.package}@${chosen.build.version} (${chosen.build.binding})`);
  const abi = Number(process.versions.modules);
  // 20.57 has bindings for Node 20 (115), 22 (127), 24 (137), 25 (141), all linked against glibc 2.38
  if (process.platform === 'linux' && atLeast(glibc, [2, 38]) && [115, 127, 137, 141].includes(abi)) {
    t.equal(chosen.build.package, '@btc-vision/uwebsockets.js', `glibc ${glibc}: 20.57 serves`);
  } else if (process.platform === 'linux' && !atLeast(glibc, [2, 38])) {
    t.equal(chosen.build.package, '@trufflesuite/uws-js-unofficial', `glibc ${glibc}: 20.30 serves`);
    t.match(chosen.skipped[0]!.reason, /GLIBC_2\.38|no uws_/, 'the reason 20.57 did not load is given');
  }
});

t.test('no build that loads: a refusal naming each one and why, never a fallback', async (t) => {
  const missing = [{ pkg: '@btc-vision/uwebsockets.js', bindings: 'no-such-folder' }, { pkg: 'no-such-uws-package', bindings: '.' }];
  const err = t.throws(() => loadUws(missing)) as Error;
  t.type(err, NativeBindingError);
  t.match(err.message, /@btc-vision\/uwebsockets\.js: no uws_\w+\.node in the package/);
  t.match(err.message, /no-such-uws-package: Cannot find (module|package)/);
});

t.test('the installed 20.57 bindings are the ones recorded', async (t) => {
  const recorded = fs.readFileSync(path.join(ROOT, 'deploy/uws-bindings.sha256'), 'utf8').split('\n')
    .filter((l) => /^[0-9a-f]{64}  /.test(l)).map((l) => l.split('  ') as [string, string]);
  t.ok(recorded.length >= 8, 'linux x64 and arm64, Node 20/22/24/25');
  const require = createRequire(import.meta.url);
  const root = path.dirname(require.resolve('@btc-vision/uwebsockets.js'));
  for (const [sha, file] of recorded) {
    t.equal(createHash('sha256').update(fs.readFileSync(path.join(root, file))).digest('hex'), sha, file);
  }
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  t.match(lock.packages['node_modules/@btc-vision/uwebsockets.js'], { version: '20.57.0', integrity: /^sha512-/ }, 'pinned by integrity in the lock file');
});
