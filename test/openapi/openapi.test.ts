import t from 'tap';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ERRORS } from '../../src/errors/index.ts';
import { ISSUE_TYPES } from '../../src/errors/issue-types.ts';
import { startApi } from '../helpers/api.ts';
import { ROOT, tempDir } from '../helpers/server.ts';

// The document the service serves (its app in process, test/helpers/api.ts; was one server
// start), checked as an integrator would: Redocly's
// recommended rules (redocly.yaml: examples must fit their schemas), a client generated with
// openapi-typescript and a call through it type-checked.
const run = promisify(execFile);
// npm, tsc, the linter and the generator are whole programs: on a loaded
// 2-core machine the file needs more than the suite's 240 s default, so it asks for more
t.setTimeout(480_000);
const bin = (rel: string) => path.join(ROOT, 'node_modules', rel);

const server = await startApi();
t.teardown(() => server.stop());
const work = tempDir('lv-openapi-');
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
const res = await fetch(`${server.baseUrl}/openapi.json`);
const text = await res.text();
const doc = JSON.parse(text);
const file = path.join(work, 'openapi.json');
fs.writeFileSync(file, text);

const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, item]) =>
  Object.entries(item).map(([method, op]) => ({ where: `${method.toUpperCase()} ${p}`, op })));

t.test('redocly lint (recommended, examples as errors) finds nothing', async (t) => {
  const out = await run(process.execPath, [bin('@redocly/cli/bin/cli.js'), 'lint', '--config', path.join(ROOT, 'redocly.yaml'), '--format=json', file], {
    cwd: work, maxBuffer: 64 * 1024 * 1024,
  }).then((r) => r.stdout, (e: { stdout: string }) => e.stdout);
  const report = JSON.parse(out.slice(out.indexOf('{')));
  t.equal(report.totals.errors, 0, JSON.stringify(report.problems.slice(0, 5), null, 1));
  t.equal(report.totals.warnings, 0, JSON.stringify(report.problems.slice(0, 5), null, 1));
});

t.test('every operation: an operationId, security stated, a request and a response example', async (t) => {
  const ids = new Set<string>();
  for (const { where, op } of operations) {
    t.match(op.operationId, /^[a-zA-Z]+$/, `${where} has an operationId`);
    ids.add(op.operationId);
    t.ok(Array.isArray(op.security), `${where} states its security`);
    if (op.requestBody) {
      const media = Object.values(op.requestBody.content)[0] as any;
      t.ok(media.example !== undefined, `${where} has a request example`);
    }
    for (const p of op.parameters ?? []) t.ok(p.example !== undefined, `${where} parameter ${p.name} has an example`);
    for (const [status, r] of Object.entries(op.responses as Record<string, any>)) {
      for (const media of Object.values((r.content ?? {}) as Record<string, any>)) {
        t.ok(media.example !== undefined || media.examples !== undefined, `${where} ${status} has an example`);
      }
    }
  }
  t.equal(ids.size, operations.length, 'operationIds are unique');
  for (const [where, op] of [['/health/live', 'get'], ['/openapi.json', 'get'], ['/auth/login', 'post'], ['/.well-known/jwks.json', 'get']]) {
    t.same(doc.paths[where!][op!].security, [], `${where} is public`);
  }
});

t.test('error responses list their codes as an enum from the catalogue; 422 lists its types', async (t) => {
  const catalogue = Object.keys(ERRORS);
  t.same(doc.components.schemas.ErrorCode.enum, catalogue);
  t.same(doc.components.schemas.IssueType.enum, [...ISSUE_TYPES]);
  t.same(doc.components.schemas.ValidationIssue.properties.type, { $ref: '#/components/schemas/IssueType' });
  for (const { where, op } of operations) {
    for (const [status, r] of Object.entries(op.responses as Record<string, any>)) {
      if (!/^[45]\d\d$/.test(status) || status === '422') continue;
      const media = r.content?.['application/json'];
      if (!media?.examples) continue; // readiness's 503 is a HealthReady body
      const codes: string[] = media.schema.properties.error.properties.code.enum;
      t.ok(codes.length > 0 && codes.every((c) => catalogue.includes(c) && String(ERRORS[c as keyof typeof ERRORS].status) === status), `${where} ${status}: ${codes}`);
      t.same(Object.keys(media.examples), codes, `${where} ${status}: one example per code`);
    }
  }
  const verify = doc.paths['/v1/modules/{module_id}/verify'].post.responses;
  t.same(verify['503'].content['application/json'].schema.properties.error.properties.code.enum, ['server_busy', 'module_unavailable', 'store_unavailable']);
  t.ok(verify['503'].headers['Retry-After'], 'Retry-After on 503');
  t.same(verify['422'].content['application/json'].schema, { $ref: '#/components/schemas/ValidationErrorBody' });
});

t.test('tuples are JSON Schema 2020-12 prefixItems', async (t) => {
  t.notMatch(text, /additionalItems/);
  const frame = doc.components.schemas.Frame.properties;
  t.equal(frame.source_size.prefixItems.length, 2);
  t.equal(frame.source_size.items, false);
  t.equal(frame.eyes_xy.prefixItems[0].prefixItems.length, 2);
});

t.test('a client generated with openapi-typescript type-checks a call', async (t) => {
  const gen = path.join(work, 'gen');
  fs.mkdirSync(gen);
  await run(process.execPath, [bin('openapi-typescript/bin/cli.js'), file, '-o', path.join(gen, 'schema.ts')], { cwd: gen });
  fs.writeFileSync(path.join(gen, 'call.ts'), `
import type { components, paths } from './schema.ts';

type Verify = paths['/v1/modules/{module_id}/verify']['post'];
type VerifyOk = Verify['responses'][200]['content']['application/json'];
type Busy = Verify['responses'][503]['content']['application/json'];
type Invalid = Verify['responses'][422]['content']['application/json'];

/** A typed call: the module id, the answer and the error codes all come from the document. */
export async function verify(baseUrl: string, token: string, moduleId: Verify['parameters']['path']['module_id'], body: FormData): Promise<VerifyOk | Busy | Invalid> {
  const res = await fetch(\`\${baseUrl}/v1/modules/\${moduleId}/verify\`, { method: 'POST', headers: { authorization: \`Bearer \${token}\` }, body });
  return (await res.json()) as VerifyOk | Busy | Invalid;
}

export async function use(): Promise<string> {
  const out = await verify('http://127.0.0.1:8080', 'lvk_x', 'rgb_liveness', new FormData());
  if ('results' in out) {
    const first = out.results[0];
    const eyes: components['schemas']['Frame']['eyes_xy'] = [[280, 200], [360, 202]];
    return \`\${first?.status} \${first?.alive} \${eyes?.[1][0]}\`;
  }
  if ('detail' in out) return out.detail.map((d) => d.type).join(',');
  const code: 'server_busy' | 'module_unavailable' | 'store_unavailable' = out.error.code;
  return code;
}

// @ts-expect-error a module id outside the document's enum
verify('', '', 'no_such_module', new FormData());
// @ts-expect-error an error code the catalogue does not have
export const wrong: components['schemas']['ErrorCode'] = 'teapot';
// @ts-expect-error a 503 body never carries quota_exceeded
export const notBusy: Busy['error']['code'] = 'quota_exceeded';
`);
  fs.writeFileSync(path.join(gen, 'tsconfig.json'), JSON.stringify({
    // skipDefaultLibCheck: TypeScript's own lib files (DOM's is 1.5 MB; checking them was half
    // the run's CPU) are not what is checked here; schema.ts and call.ts are checked in full
    // (issue 43)
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, allowImportingTsExtensions: true, lib: ['ES2022', 'DOM'], types: [], skipDefaultLibCheck: true },
    files: ['call.ts'],
  }));
  const tsc = await run(process.execPath, [bin('typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: gen }).then(() => '', (e: { stdout: string }) => e.stdout || 'failed');
  t.equal(tsc, '', 'the generated client type-checks, and the @ts-expect-error lines are real errors');
});

t.test('what any route may answer is in the document: 503 server_busy with Retry-After (not on the health probes), and 400/413 on every JSON body', async (t) => {
  const ops = Object.entries(doc.paths as Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> }; responses: Record<string, { content?: { 'application/json'?: { schema?: { properties?: { error?: { properties?: { code?: { enum?: string[] } } } } } } }; headers?: Record<string, unknown> }> }>>)
    .flatMap(([p, methods]) => Object.entries(methods).map(([m, op]) => ({ where: `${m.toUpperCase()} ${p}`, p, op })));
  const codesAt = (op: (typeof ops)[number]['op'], status: string) => op.responses[status]?.content?.['application/json']?.schema?.properties?.error?.properties?.code?.enum ?? [];
  for (const { where, p, op } of ops) {
    if (p.startsWith('/health/')) {
      t.notOk(codesAt(op, '503').includes('server_busy'), `${where}: never refused by the connection cap`);
      continue;
    }
    t.ok(codesAt(op, '503').includes('server_busy'), `${where}: 503 server_busy`);
    t.ok(op.responses['503']?.headers?.['Retry-After'], `${where}: with Retry-After`);
    if (codesAt(op, '401').includes('invalid_token')) t.ok(op.responses['401']?.headers?.['WWW-Authenticate'], `${where}: its 401 names the Bearer scheme`);
    if (op.requestBody?.content?.['application/json']) {
      t.ok(codesAt(op, '413').includes('payload_too_large'), `${where}: 413 payload_too_large`);
      t.ok(codesAt(op, '400').includes('invalid_content_length'), `${where}: 400 invalid_content_length`);
    }
  }
});
