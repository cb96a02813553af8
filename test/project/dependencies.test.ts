// The layering stays one-way (issue 10): folders of src/ depend on each other without cycles.
// Type-only imports count: they are dependencies of the design even when they vanish from the
// JavaScript.
// And test/ mirrors src/: the tests of src/<folder>/ are found in test/<folder>/.

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/server.ts';

const SRC = path.join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** Relative module specifiers of a file's static imports, re-exports and dynamic imports. */
function specifiers(text: string): string[] {
  // comments out first, so an example in a comment is not an import
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const out: string[] = [];
  for (const m of code.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/g)) out.push(m[1]!);
  for (const m of code.matchAll(/(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g)) out.push(m[1]!);
  for (const m of code.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]!);
  return out.filter((s) => s.startsWith('.'));
}

/** A folder of src/ (its first segment), or a file directly in src/ (its own name). */
function unitOf(file: string): string | null {
  const rel = path.relative(SRC, file);
  if (rel.startsWith('..')) return null;
  const parts = rel.split(path.sep);
  return parts[0]!;
}

const files = sourceFiles(SRC);
const edges = new Map<string, Map<string, string>>(); // from -> to -> an example "file -> import"
for (const file of files) {
  const from = unitOf(file)!;
  for (const spec of specifiers(fs.readFileSync(file, 'utf8'))) {
    const to = unitOf(path.resolve(path.dirname(file), spec));
    if (to === null || to === from) continue;
    if (!edges.has(from)) edges.set(from, new Map());
    if (!edges.get(from)!.has(to)) edges.get(from)!.set(to, `${path.relative(ROOT, file)} imports ${spec}`);
  }
}

/** Pairs of units that reach each other (both directions), as "a <-> b" with a < b. */
function mutual(): Map<string, string> {
  const reach = (a: string): Set<string> => {
    const seen = new Set<string>();
    const todo = [a];
    while (todo.length) for (const n of edges.get(todo.pop()!)?.keys() ?? []) if (!seen.has(n)) (seen.add(n), todo.push(n));
    return seen;
  };
  const units = [...new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])])].sort();
  const reaches = new Map(units.map((u) => [u, reach(u)]));
  const out = new Map<string, string>();
  for (const a of units) {
    for (const b of units) {
      if (a < b && reaches.get(a)!.has(b) && reaches.get(b)!.has(a)) {
        out.set(`${a} <-> ${b}`, `${edges.get(a)?.get(b) ?? `${a} reaches ${b}`}; ${edges.get(b)?.get(a) ?? `${b} reaches ${a}`}`);
      }
    }
  }
  return out;
}

t.test('folders of src/ depend on each other without cycles', async (t) => {
  for (const [pair, example] of mutual()) t.fail(`dependency cycle ${pair}: ${example}`);
});

// The store is the bottom of the design (http -> use cases -> domain -> store): it persists
// and applies its rules inside its own transactions, and knows nothing of the layers above.
t.test('the store depends on no layer above it', async (t) => {
  // errors: the HTTP error catalogue; the store reports outcomes and its own errors
  // (src/store/errors.ts), and the layers above decide what a caller hears
  const above = ['metering', 'auth', 'verify', 'http', 'admin', 'cli', 'inference', 'observability', 'openapi', 'signing', 'errors'];
  for (const to of above) t.notOk(edges.get('store')?.has(to), `store -> ${to}: ${edges.get('store')?.get(to) ?? ''}`);
});

t.test('the cycles named in issue 10 are gone', async (t) => {
  const found = mutual();
  for (const pair of ['images <-> packets', 'admin <-> auth', 'http <-> verify']) t.notOk(found.has(pair), pair);
});

t.test('the wire contract (src/contract) is a leaf, and the client package imports nothing of the service', async (t) => {
  t.same([...(edges.get('contract')?.keys() ?? [])], [], 'src/contract imports no other part of src/');
  const clientDir = path.join(ROOT, 'client', 'src');
  for (const file of sourceFiles(clientDir)) {
    for (const spec of specifiers(fs.readFileSync(file, 'utf8'))) {
      const target = path.resolve(path.dirname(file), spec);
      t.ok(target.startsWith(clientDir + path.sep), `${path.relative(ROOT, file)} imports ${spec} from inside the package`);
    }
  }
});

t.test('the import scanner sees imports (so the checks above cannot pass vacuously)', async (t) => {
  t.ok(edges.get('http')?.has('verify'), 'http -> verify is seen');
  t.ok(edges.get('packets')?.has('contract'), 'packets -> contract is seen');
  t.ok(edges.get('metering')?.has('store') && edges.get('auth')?.has('store'), 'metering -> store and auth -> store are seen');
  t.ok(edges.get('store')?.has('contract'), 'store -> contract is seen');
});

/** Every relative import of every file in src/, resolved: [importing file, imported file]. */
const fileEdges: [string, string][] = files.flatMap((file) =>
  specifiers(fs.readFileSync(file, 'utf8')).map((spec): [string, string] => [file, path.resolve(path.dirname(file), spec)]));

// A folder's index.ts is its surface (issue 27): what another folder may use is what the index
// exports, so a file can move or split inside its folder without touching its users.
// The store's two implementations each have a surface of their own (issue 43): the tools that
// work on one store's own files, and only they, import it; everything else asks store/index.ts
// for the roles it uses.
const NESTED_SURFACES = new Map<string, string[]>([
  // the CLI's backup and restore (a copy of LMDB's files) and `db migrate`'s schema version
  ['store/lmdb/index.ts', ['cli']],
  // `db migrate`'s answer on PostgreSQL: the migrations this build knows and the ones it applied
  ['store/pg/index.ts', ['cli']],
]);
t.test('a folder of src/ is entered only through its index.ts', async (t) => {
  let crossings = 0;
  const past: string[] = [];
  for (const [from, to] of fileEdges) {
    const target = path.relative(SRC, to).split(path.sep);
    if (target[0] === '..' || target.length === 1 || target[0] === unitOf(from)) continue;
    crossings++;
    const surface = target.join('/');
    if (target.length === 2 && target[1] === 'index.ts') continue;
    if (NESTED_SURFACES.get(surface)?.includes(unitOf(from)!)) continue;
    past.push(`${path.relative(ROOT, from)} imports ${path.relative(ROOT, to)}`);
  }
  t.same(past, [], 'no import goes past a folder\'s index.ts');
  t.ok(crossings > 100, `the scanner saw the cross-folder imports (${crossings})`);
});

// workers/ holds the entries of the threads src/ starts (the inference pool's, auto's probe):
// they import from src/, never the other way (issue 43). What the two sides say to each other
// is declared in src/ (src/inference/protocol.ts), so a type a thread answers with is not
// imported back up from its entry; src/ names an entry only as a file to start (threadEntry).
const WORKERS = path.join(ROOT, 'workers');
const intoWorkers = (file: string, spec: string): boolean => path.resolve(path.dirname(file), spec).startsWith(WORKERS + path.sep);

t.test('nothing in src/ imports from workers/ (workers/ import from src/)', async (t) => {
  // every kind of module src/ holds, the thread entry's .mjs included
  const all = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? all(p) : /\.(ts|mts|mjs|js|cjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
  const past: string[] = [];
  for (const file of all(SRC)) {
    for (const spec of specifiers(fs.readFileSync(file, 'utf8'))) if (intoWorkers(file, spec)) past.push(`${path.relative(ROOT, file)} imports ${spec}`);
  }
  t.same(past, [], 'no file of src/ imports a module of workers/');
  // not vacuous: the scanner sees the workers' imports of src/, and would see one the other way
  const up = sourceFiles(WORKERS).flatMap((file) => specifiers(fs.readFileSync(file, 'utf8')).filter((s) => path.resolve(path.dirname(file), s).startsWith(SRC + path.sep)));
  t.ok(up.length > 5, `the scanner sees workers/ importing src/ (${up.length} imports)`);
  const planted = path.join(SRC, 'inference', 'backend-probe.ts');
  t.same(specifiers("import type { ProbeTask } from '../../workers/backend-probe.ts';\n").filter((s) => intoWorkers(planted, s)), ['../../workers/backend-probe.ts'], 'a type-only import of workers/ from src/ is caught');
});

// Inside a folder, files depend on each other one way too: a cycle (even a type-only one, like
// the CLI's commands importing a type from the entry that imports them) means two files are one.
t.test('the files inside each folder of src/ import each other without cycles', async (t) => {
  const inside = new Map<string, string[]>();
  for (const [from, to] of fileEdges) {
    if (unitOf(from) !== unitOf(to) || from === to) continue;
    if (!inside.has(from)) inside.set(from, []);
    inside.get(from)!.push(to);
  }
  // depth-first search with colours: a grey node met again closes a cycle
  const colour = new Map<string, 'grey' | 'black'>();
  const stack: string[] = [];
  const cycles: string[] = [];
  const visit = (n: string): void => {
    colour.set(n, 'grey');
    stack.push(n);
    for (const m of inside.get(n) ?? []) {
      if (colour.get(m) === 'grey') cycles.push(stack.slice(stack.indexOf(m)).concat(m).map((p) => path.relative(ROOT, p)).join(' -> '));
      else if (!colour.has(m)) visit(m);
    }
    stack.pop();
    colour.set(n, 'black');
  };
  for (const n of inside.keys()) if (!colour.has(n)) visit(n);
  for (const c of cycles) t.fail(`import cycle inside a folder: ${c}`);
  t.ok(inside.size > 50, `the scanner saw imports inside folders (${inside.size} files)`);
});

// The wire vocabulary (ModuleId, Mode, limits ...) has one home, src/contract (issue 27): the
// packets, the store and the inference code import it from there, never through another folder's
// re-export, so a reader finds a limit where it is declared.
t.test('no folder re-exports the wire contract', async (t) => {
  const contract = await import('../../src/contract/index.ts');
  for (const unit of ['packets', 'store', 'inference', 'http', 'verify']) {
    const surface = await import(`../../src/${unit}/index.ts`);
    const leaked = Object.keys(contract).filter((name) => name in surface && surface[name] === (contract as Record<string, unknown>)[name]);
    t.same(leaked, [], `src/${unit}/index.ts re-exports none of src/contract`);
  }
});

// A reader who knows src/<folder>/ finds its tests in test/<folder>/. A folder directly under
// test/ is therefore a folder of src/, or one of these, each with the reason it exists.
const TEST_FOLDERS_BEYOND_SRC = new Set([
  // shared test code (servers, captures, waits, the ingest checks): no tests of its own
  'helpers',
  // the service as a whole, end to end (start and stop, worker faults, the soak short versions,
  // backup and restore): src/main.ts, startup.ts, lifecycle.ts and worker.ts lie directly in src/
  'service',
  // checks over the whole source tree rather than one folder of it (this file)
  'project',
  // scripts/ is a top-level folder of the repository (the build stamp)
  'scripts',
  // deploy/ is a top-level folder of the repository (systemd unit, nginx snippet, manifests)
  'deploy',
  // the OCI image test, run by `npm run image:test` (.ci/run), not by `npm test`
  'container',
  // capture/ is a top-level package of the repository (the browser capture component)
  'capture',
]);

t.test('test/ mirrors src/: every folder under test/ is a folder of src/ or a named exception', async (t) => {
  const folders = (dir: string) => fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  const srcFolders = new Set(folders(SRC));
  const testFolders = folders(path.join(ROOT, 'test'));
  t.ok(srcFolders.has('http') && testFolders.includes('http'), 'the scan sees the folders of src/ and test/');
  const stray = testFolders.filter((d) => !srcFolders.has(d) && !TEST_FOLDERS_BEYOND_SRC.has(d));
  t.same(stray, [], 'no folder under test/ outside src/\'s folders and the named exceptions');
  const gone = [...TEST_FOLDERS_BEYOND_SRC].filter((d) => !testFolders.includes(d));
  t.same(gone, [], 'every named exception still exists (the list does not go stale)');
});

// The store's boundary is typed (issue 43): its interface is cut into roles (src/store/backend.ts),
// each caller asks for the ones it uses, so a test hands it a small object of those methods and
// needs no cast; StoreBackend, all of the roles, is held only where a process is composed.
const STORE = path.join(SRC, 'store');
const codeOf = (file: string): string => fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
const backendText = codeOf(path.join(STORE, 'backend.ts'));
const ROLES = backendText.match(/interface StoreBackend\s+extends([^{]*)\{/)?.[1]!.split(',').map((r) => r.trim()) ?? [];
/** a cast to the store's type or one of its roles, or to the store a port asks for */
const STORE_CAST = new RegExp(`\\bas\\s+(?:unknown\\s+as\\s+|any\\b)(?:\\s*(?:StoreBackend|${ROLES.join('|')})\\b|\\s*\\w+\\['store'\\])|\\bas\\s+(?:StoreBackend|${ROLES.join('|')})\\b`);
const ANY = /(?::\s*any\b|\bas\s+any\b|<any\b|\bany\[\]|,\s*any>)/;
/** Where the whole store is held: the API worker's services (worker.ts composes them; the
 * routes hand each use case its roles), the CLI's entry and its commands' type, the main
 * thread's cluster, its stop and the listening line. */
const COMPOSERS = ['src/http/services.ts', 'src/http/compose.ts', 'src/cli/command.ts', 'src/cli/main.ts', 'src/cluster/cluster.ts', 'src/cluster/process-control.ts', 'src/cluster/announce.ts'];
const THIS_FILE = path.join(ROOT, 'test', 'project', 'dependencies.test.ts');

t.test('no any at the store\'s boundary, no cast to a store role', async (t) => {
  t.ok(ROLES.length >= 10 && ROLES.includes('MeteringStore'), `StoreBackend is the roles' intersection (${ROLES.length} roles)`);
  // the surface: the interface, the records and rules store/index.ts re-exports whole
  const surface = [...codeOf(path.join(STORE, 'index.ts')).matchAll(/export \* from '\.\/([\w-]+\.ts)'/g)].map((m) => path.join(STORE, m[1]!));
  t.ok(surface.some((f) => f.endsWith('backend.ts')) && surface.some((f) => f.endsWith('records.ts')), 'the scan sees backend.ts and records.ts');
  for (const file of surface) t.notOk(ANY.test(codeOf(file)), `${path.relative(ROOT, file)} declares no any`);
  const casts: string[] = [];
  for (const dir of [SRC, path.join(ROOT, 'test'), path.join(ROOT, 'bench')]) {
    for (const file of sourceFiles(dir)) {
      // the implementations and their hooks (faults.ts); the composers, which hold the whole
      // store by design (the CLI hands a command its store, absent for a noStore command); this file
      if (file.startsWith(STORE + path.sep) || COMPOSERS.includes(path.relative(ROOT, file)) || file === THIS_FILE) continue;
      codeOf(file).split('\n').forEach((line, i) => STORE_CAST.test(line) && casts.push(`${path.relative(ROOT, file)}:${i + 1}: ${line.trim()}`));
    }
  }
  t.same(casts, [], 'nothing outside src/store casts to the store or a role of it');
  // not vacuous: the casts the fakes used to need are caught
  t.ok(STORE_CAST.test("store: { moduleEnabled } as unknown as VerifyDeps['store'],"), 'a cast to a port\'s store is caught');
  t.ok(STORE_CAST.test('const s = fake as unknown as StoreBackend;') && STORE_CAST.test('f(x as CallerReads)'), 'a cast to StoreBackend or a role is caught');
  t.ok(ANY.test('getToken(id: string): Promise<any>;') && ANY.test('  listAudit(q: any): void;'), 'an any in a signature is caught');
});

t.test('StoreBackend, the whole store, is held only where a process is composed', async (t) => {
  const holders = files.filter((f) => !f.startsWith(STORE + path.sep) && /\bStoreBackend\b/.test(codeOf(f))).map((f) => path.relative(ROOT, f));
  t.same(holders.filter((f) => !COMPOSERS.includes(f)), [], 'no use case asks for the whole store');
  t.ok(holders.includes('src/cli/main.ts'), `the scan sees the composers (${holders.length})`);
});
