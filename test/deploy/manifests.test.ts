// deploy/kubernetes and deploy/compose.yaml (issue 30), without a cluster or a container:
// every Kubernetes object is validated against the Kubernetes OpenAPI schemas compiled into
// kubernetes-models, unknown fields are caught by TypeScript's excess-property check against
// the same package's types (the schemas admit any extra field, and a misspelt probe would
// otherwise just be ignored by the cluster), and the files are held to what the service and
// its image actually are: routes, port, uid, configuration variables, metric names, drain.

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { Secret, Service } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { ConfigSchema, loadConfig } from '../../src/config/index.ts';
import { compileTrust } from '../../src/http/client-address.ts';
import { DRAIN_TIMEOUT_MS } from '../../src/lifecycle.ts';
import { OPERATIONS } from '../../src/openapi/operations.ts';
import { ROOT } from '../helpers/server.ts';

const K8S = path.join(ROOT, 'deploy/kubernetes');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
const IMAGE = `localhost/liveness-service:${pkg.version}`;
const containerfile = fs.readFileSync(path.join(ROOT, 'Containerfile'), 'utf8');
const DRAIN_S = DRAIN_TIMEOUT_MS / 1000;

// kind -> model class and the module that declares its interface (for the strict check)
const MODELS = {
  'v1/Secret': { model: Secret, types: ['kubernetes-models/v1/Secret', 'ISecret'] },
  'v1/Service': { model: Service, types: ['kubernetes-models/v1/Service', 'IService'] },
  'apps/v1/Deployment': { model: Deployment, types: ['kubernetes-models/apps/v1/Deployment', 'IDeployment'] },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, types: ['kubernetes-models/policy/v1/PodDisruptionBudget', 'IPodDisruptionBudget'] },
  'autoscaling/v2/HorizontalPodAutoscaler': { model: HorizontalPodAutoscaler, types: ['kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler', 'IHorizontalPodAutoscaler'] },
} as const;
type KindKey = keyof typeof MODELS;

interface Manifest { file: string; doc: any; key: string }

function loadManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of fs.readdirSync(K8S).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()) {
    for (const d of parseAllDocuments(fs.readFileSync(path.join(K8S, file), 'utf8'))) {
      if (d.errors.length) throw new Error(`${file}: ${d.errors[0]!.message}`);
      const doc = d.toJS();
      if (doc) out.push({ file, doc, key: `${doc.apiVersion}/${doc.kind}` });
    }
  }
  return out;
}

/** Schema validation; throws with the schema's message. */
function validate(m: Manifest): void {
  const entry = MODELS[m.key as KindKey];
  if (!entry) throw new Error(`${m.file}: no schema for ${m.key}`);
  new (entry.model as any)(m.doc).validate();
}

/** Type-checks each manifest as an object literal of its kind's interface: an unknown field
 * at any depth is an excess-property error. Returns the diagnostics, one string each. */
function strictCheck(manifests: Manifest[]): string[] {
  const lines: string[] = [];
  manifests.forEach((m, i) => {
    const [mod, iface] = MODELS[m.key as KindKey].types;
    lines.push(`import type { ${iface} as T${i} } from '${mod}';`, `export const m${i}: T${i} = ${JSON.stringify(m.doc)};`);
  });
  const file = path.join(ROOT, 'test/deploy/__manifests__.ts');
  const options: ts.CompilerOptions = {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext, types: [], skipLibCheck: true,
  };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const source = lines.join('\n');
  host.readFile = (f) => (path.resolve(f) === file ? source : read(f));
  host.fileExists = (f) => path.resolve(f) === file || exists(f);
  // the virtual file is an ES module, like the package it imports
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (path.resolve(f) === file
    ? ts.createSourceFile(f, source, { languageVersion: ts.ScriptTarget.ES2022, impliedNodeFormat: ts.ModuleKind.ESNext })
    : getSourceFile(f, lang, ...rest));
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
    const which = at ? manifests[Math.floor(at.line / 2)] : undefined;
    return `${which ? `${which.file} ${which.key}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

const manifests = loadManifests();
const one = (key: string) => {
  const found = manifests.filter((m) => m.key === key);
  if (found.length !== 1) throw new Error(`expected one ${key}, found ${found.length}`);
  return found[0]!.doc;
};

t.test('every object validates against the Kubernetes schemas and has no unknown field', async (t) => {
  t.same(manifests.map((m) => m.key).sort(), Object.keys(MODELS).sort(), 'Secret, Deployment, Service, PodDisruptionBudget and HPA, one each');
  for (const m of manifests) t.doesNotThrow(() => validate(m), `${m.file}: ${m.key}`);
  t.same(strictCheck(manifests), [], 'no field that Kubernetes does not know');
  const kustomization = parseYaml(fs.readFileSync(path.join(K8S, 'kustomization.yaml'), 'utf8'));
  t.same([...kustomization.resources].sort(), [...new Set(manifests.map((m) => m.file))].sort(), 'kustomization lists every manifest file');
});

t.test('the checks fail on a broken manifest', async (t) => {
  const deployment = manifests.find((m) => m.key === 'apps/v1/Deployment')!;
  const wrongType = structuredClone(deployment);
  wrongType.doc.spec.replicas = 'two';
  t.throws(() => validate(wrongType), /replicas/, 'a string where the schema wants an integer');
  const noSelector = structuredClone(deployment);
  delete noSelector.doc.spec.selector;
  t.throws(() => validate(noSelector), /selector/, 'a required field missing');
  const misspelt = structuredClone(deployment);
  const c = misspelt.doc.spec.template.spec.containers[0];
  c.readinessProb = c.readinessProbe;
  delete c.readinessProbe;
  t.doesNotThrow(() => validate(misspelt), 'the schemas alone accept an unknown field');
  t.match(strictCheck([misspelt]).join('\n'), /readinessProb/, 'the strict check names it');
});

t.test('the Deployment fits the image and the service', async (t) => {
  const d = one('apps/v1/Deployment');
  const pod = d.spec.template.spec;
  const c = pod.containers[0];
  t.equal(c.image, IMAGE, 'the image npm run image:build tags');
  const port = Number(/^\s*PORT=(\d+)/m.exec(containerfile)?.[1]);
  t.equal(c.ports[0].containerPort, port, 'the port the image listens on');
  const uid = /^USER (\d+):(\d+)$/m.exec(containerfile);
  t.equal(pod.securityContext.runAsUser, Number(uid?.[1]), "the image's user");
  t.equal(pod.securityContext.fsGroup, Number(uid?.[2]), 'the data volume is writable by it');
  t.equal(c.securityContext.readOnlyRootFilesystem, true);
  t.same(c.volumeMounts.map((v: any) => v.mountPath).sort(), ['/data', '/tmp'], 'the only writable paths: DATA_DIR and /tmp');
  t.match(containerfile, /^\s*DATA_DIR=\/data/m, 'DATA_DIR is /data in the image');

  const routes = new Set(OPERATIONS.filter((o) => o.method === 'get').map((o) => o.path));
  t.equal(c.readinessProbe.httpGet.path, '/health/ready', 'readiness: the store and the models');
  // a database outage must take replicas out of the Service, never restart them all
  t.equal(c.livenessProbe.httpGet.path, '/health/live', 'liveness: never the store');
  t.equal(c.startupProbe.httpGet.path, '/health/live');
  for (const p of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
    t.ok(routes.has(p.httpGet.path), `${p.httpGet.path} is a route of the service`);
    t.equal(p.httpGet.port, c.ports[0].name, 'probes the named port');
  }
  t.ok(pod.terminationGracePeriodSeconds > DRAIN_S + (c.lifecycle?.preStop?.sleep?.seconds ?? 0),
    `grace period ${pod.terminationGracePeriodSeconds} s outlasts the preStop pause and the ${DRAIN_S} s drain`);

  for (const sel of [one('v1/Service').spec.selector, one('policy/v1/PodDisruptionBudget').spec.selector.matchLabels, d.spec.selector.matchLabels]) {
    t.match(d.spec.template.metadata.labels, sel, 'selects the Deployment\'s pods');
  }
  t.equal(one('v1/Service').spec.ports[0].targetPort, c.ports[0].name);
  t.equal(c.envFrom[0].secretRef.name, one('v1/Secret').metadata.name, 'the Secret it reads exists');
  t.equal(d.spec.strategy.rollingUpdate.maxUnavailable, 0, 'a rollout never lowers capacity');
});

t.test('configuration from the manifests and compose is what the service accepts', async (t) => {
  const known = new Set([...Object.keys(ConfigSchema.properties), 'NODE_ENV', 'MALLOC_MMAP_THRESHOLD_']);
  const c = one('apps/v1/Deployment').spec.template.spec.containers[0];
  const env: Record<string, string> = { ...one('v1/Secret').stringData };
  for (const e of c.env) env[e.name] = e.value;
  for (const name of Object.keys(env)) t.ok(known.has(name), `${name} is a variable the service reads`);
  const config = loadConfig(env, ROOT, 4);
  t.doesNotThrow(() => compileTrust(config.TRUSTED_PROXIES), 'TRUSTED_PROXIES parses');
  t.ok(config.DATABASE_URL, 'PostgreSQL: replicas share one store');
  // CPU request: the inference threads compute; API workers mostly wait on uploads
  t.ok(Number(c.resources.requests.cpu) >= config.INFERENCE_THREADS, 'a core requested per inference thread');

  const hpa = one('autoscaling/v2/HorizontalPodAutoscaler');
  t.equal(hpa.spec.scaleTargetRef.name, one('apps/v1/Deployment').metadata.name);
  const metric = hpa.spec.metrics[0].pods.metric.name;
  const exported = fs.readFileSync(path.join(ROOT, 'src/observability/metrics.ts'), 'utf8');
  t.match(exported, new RegExp(`name: '${metric}'`), `${metric} is a metric the service exports`);
  const slots = config.WORKERS * 2;
  t.ok(Number(hpa.spec.metrics[0].pods.target.averageValue) < slots, `the scale-out target is below the ${slots} slots of a replica`);
  t.ok(hpa.spec.minReplicas >= 2 && one('policy/v1/PodDisruptionBudget').spec.maxUnavailable < hpa.spec.minReplicas, 'a disruption leaves a replica serving');

  const compose = parseYaml(fs.readFileSync(path.join(ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true });
  const nodes = Object.entries<any>(compose.services).filter(([, s]) => s.image === IMAGE);
  t.equal(nodes.length, 2, 'two service nodes on the image npm run image:build tags');
  for (const [name, s] of nodes) {
    t.equal(s.depends_on.db.condition, 'service_healthy', `${name} waits for the database`);
    t.equal(s.read_only, true, `${name}: read-only root filesystem`);
    t.ok(s.volumes.some((v: string) => v.endsWith(':/data')), `${name}: DATA_DIR on a volume`);
    t.ok(Number(/^(\d+)s$/.exec(s.stop_grace_period)?.[1]) > DRAIN_S, `${name}: stop grace outlasts the drain`);
    // compose's interpolation: ${NAME:-default} takes its default, ${NAME:?message} a sample
    const nodeEnv = Object.fromEntries(Object.entries<string>(s.environment).map(([k, v]) => [k, String(v).replace(
      /\$\{([A-Z0-9_]+)(?::-([^}]*)|:\?[^}]*)\}/g, (_m, n: string, dflt?: string) => dflt ?? (n === 'METRICS_TOKEN' ? 'x'.repeat(16) : 'secret'),
    )]));
    for (const n of Object.keys(nodeEnv)) t.ok(known.has(n), `${name}: ${n} is a variable the service reads`);
    const cfg = loadConfig(nodeEnv, ROOT, 4);
    t.equal(new URL(cfg.DATABASE_URL!).hostname, 'db', `${name}: DATABASE_URL names the db service`);
  }
  t.match(compose.services.db.image, /^localhost\/liveness-postgres:/, 'the PostgreSQL image built offline');
  t.match(fs.readFileSync(path.join(ROOT, 'deploy/container/postgres.Containerfile'), 'utf8'), /^HEALTHCHECK /m, 'service_healthy needs a HEALTHCHECK in that image');
});
