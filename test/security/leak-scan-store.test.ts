// Secret-leak scan through state, live query and the demo gateway's store. Canaries: the tenant
// token, a Secret's value (and a copy of it in the last-applied annotation), and the bearer token
// the collector authenticates with, read from a token file. The real collector runs at trace over
// verified TLS to the demo gateway, which stores into a SQLite file; then every output is
// searched: the collector's log, /metrics, /readyz?verbose, `config check`, a live query's
// answer, the SQLite files byte for byte, and every JSON endpoint of the demo gateway's HTTP API.
//
// security.profile default is the seed's product decision: Secret values flow to the gateway
// (and so into its store) unless redacted; that run is also the control that proves the scan
// sees a canary that is there. security.profile strict: no canary anywhere.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { createWebUi } from '../../demo-gateway/web-ui.js';
import { AgentMessage, QueryVerb, QueryView } from '../../proto/index.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  type TestNamespace,
} from '../helpers/kube.js';
import { captureLogs, TLS_FIXTURES } from '../helpers/gateway-harness.js';

const execFileAsync = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const CANARY_TENANT = 'kubexa-canary-tenant-3b7d0e91f25c4a68';
const CANARY_SECRET = 'kubexa-canary-secret-value-9c41e27ab85d03f6';
const SECRET_NAME = 'leak-canary';

/** Every spelling a value can take on its way: raw, base64 (Secret data), base64url. */
function spellings(value: string): string[] {
  return [value, Buffer.from(value).toString('base64'), Buffer.from(value).toString('base64url')];
}

type Outputs = Readonly<Record<string, string>>;

/** Where each canary spelling was found. */
function findings(outputs: Outputs, canaries: Record<string, string[]>): string[] {
  const found: string[] = [];
  for (const [canary, forms] of Object.entries(canaries)) {
    for (const [where, text] of Object.entries(outputs)) {
      if (forms.some((form) => form !== '' && text.includes(form)))
        found.push(`${canary} in ${where}`);
    }
  }
  return found.sort();
}

describe('secret-leak scan through state, query and the demo gateway store', () => {
  const admin = loadKubeConfig(inject('kubeconfigPath'));
  const core = admin.makeApiClient(CoreV1Api);
  let ns: TestNamespace | undefined;
  let workdir = '';
  let bearerToken = '';
  let kubeconfigPath = '';
  const bindingName = `kubexa-leak-${String(process.pid)}`;

  beforeAll(async () => {
    ns = await createTestNamespace(admin, 'kubexa-leak');
    workdir = await mkdtemp(join(tmpdir(), 'kubexa-leak-store-'));
    const namespace = ns.name;
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name: SECRET_NAME,
          annotations: {
            // What `kubectl apply` leaves behind: the whole object, values included.
            'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({
              apiVersion: 'v1',
              kind: 'Secret',
              stringData: { password: CANARY_SECRET },
            }),
          },
        },
        stringData: { password: CANARY_SECRET },
      },
    });
    // The collector's identity: a ServiceAccount whose real token sits in a token file.
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: 'leak-collector' } },
    });
    await admin.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name: bindingName },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'cluster-admin',
        },
        subjects: [{ kind: 'ServiceAccount', name: 'leak-collector', namespace }],
      },
    });
    const minted = await core.createNamespacedServiceAccountToken({
      name: 'leak-collector',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    bearerToken = minted.status?.token ?? '';
    const tokenFile = join(workdir, 'token');
    await writeFile(tokenFile, bearerToken, { mode: 0o600 });
    const cluster = admin.getCurrentCluster();
    if (cluster === null) throw new Error('kubeconfig has no current cluster');
    kubeconfigPath = join(workdir, 'kubeconfig.yaml');
    await writeFile(
      kubeconfigPath,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'c',
            cluster: {
              server: cluster.server,
              ...(cluster.caData === undefined
                ? { 'insecure-skip-tls-verify': true }
                : { 'certificate-authority-data': cluster.caData }),
            },
          },
        ],
        users: [{ name: 'u', user: { 'token-file': tokenFile } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
  });

  afterAll(async () => {
    await admin
      .makeApiClient(RbacAuthorizationV1Api)
      .deleteClusterRoleBinding({ name: bindingName })
      .catch(() => undefined);
    await ns?.delete();
    if (workdir !== '') await rm(workdir, { recursive: true, force: true });
  });

  /** Which paths carried the Secret in the last scan (state and query land in their own changes). */
  let paths = { state: false, query: false };

  async function scan(profile: 'default' | 'strict'): Promise<Outputs> {
    const namespace = ns?.name ?? '';
    const dir = await mkdtemp(join(workdir, `${profile}-`));
    const databasePath = join(dir, 'gateway.sqlite');
    // The demo gateway's own log is scanned too, at its most verbose.
    const gatewayLog = captureLogs('trace');
    const gateway = new DemoGateway(
      { acceptToken: CANARY_TENANT, databasePath },
      { logger: gatewayLog.logger },
    );
    const port = await gateway.listen('127.0.0.1', 0, {
      cert: TLS_FIXTURES.cert,
      key: TLS_FIXTURES.key,
    });
    const web = createWebUi(gateway);
    const configPath = join(dir, 'config.yaml');
    await writeFile(
      configPath,
      [
        'gateway:',
        `  address: 127.0.0.1:${String(port)}`,
        '  tls: true',
        `  ca_cert_path: ${JSON.stringify(TLS_FIXTURES.caPath)}`,
        'collect:',
        '  logs: {enabled: false}',
        '  metrics: {enabled: false}',
        '  state:',
        '    rules:',
        `      - {id: canary, namespace: ${namespace}, resources: [secrets, pods]}`,
        'query:',
        '  rules:',
        `    - {id: canary, namespace: ${namespace}, resources: [secrets]}`,
        'buffer:',
        `  spill_dir: ${JSON.stringify(join(dir, 'spill'))}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        'log:',
        '  level: trace',
        'security:',
        `  profile: ${profile}`,
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: kubeconfigPath,
      KUBEXA_TENANT_TOKEN: CANARY_TENANT,
    };
    delete env['KUBERNETES_SERVICE_HOST'];
    let output = '';
    const child: ChildProcess = spawn(
      process.execPath,
      ['--import', 'tsx', join(root, 'collector', 'main.ts'), `--config=${configPath}`],
      { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    try {
      await eventually(
        'the collector started line',
        () => Promise.resolve(output.includes('"collector started"') ? true : undefined),
        { timeoutMs: 60_000 },
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${output.slice(-4000)}`);
      });
      const started = output.split('\n').find((line) => line.includes('"collector started"'));
      const ports = (JSON.parse(started ?? '{}') as { ports: { health: number; metrics: number } })
        .ports;
      await gateway.waitForSession();
      // Once the collector advertises state, the Secret must reach the store through it, so the
      // scan covers that path too (collect.state lands in its own change).
      const handshake = AgentMessage.decode(
        gateway.store.payloads('handshake')[0] ?? new Uint8Array(),
      );
      const stateAdvertised =
        handshake.payload?.$case === 'handshake' && handshake.payload.value.caps?.state === true;
      if (stateAdvertised) {
        // Secrets never emit ADDED (the Go agent's rule), and the canary existed before the
        // collector started: each round changes a label until a MODIFIED event carries it.
        let touches = 0;
        await eventually(
          'the canary Secret in the store',
          async () => {
            const stored = gateway.store
              .payloads('state')
              .some((payload) => Buffer.from(payload).includes(SECRET_NAME));
            if (stored) return true;
            const secret = await core.readNamespacedSecret({ name: SECRET_NAME, namespace });
            const metadata = secret.metadata ?? {};
            metadata.labels = { ...metadata.labels, 'kubexa.io/touched': String(++touches) };
            secret.metadata = metadata;
            await core.replaceNamespacedSecret({ name: SECRET_NAME, namespace, body: secret });
            return undefined;
          },
          { timeoutMs: 60_000, intervalMs: 1_000 },
        ).catch((err: unknown) => {
          throw new Error(
            `${String(err)} (stored: ${JSON.stringify(gateway.store.countByKind())})\n${output.slice(-3000)}`,
          );
        });
      }
      const session = gateway.sessions()[0]?.sessionId ?? '';
      const answer = await gateway.query(session, {
        queryId: 'leak-q',
        ref: { group: '', version: 'v1', resource: 'secrets' },
        verb: QueryVerb.QUERY_VERB_GET,
        view: QueryView.QUERY_VIEW_FULL,
        namespace,
        name: SECRET_NAME,
        labelSelector: '',
        fieldSelector: '',
        limit: 0,
        continueToken: '',
        timeoutMs: 10_000,
      });
      // Live queries land in their own change; until then the agent refuses them with this.
      const queryAnswered = answer.error === undefined;
      if (!queryAnswered) expect(answer.error?.message).toContain('not supported');
      const metrics = await (
        await fetch(`http://127.0.0.1:${String(ports.metrics)}/metrics`)
      ).text();
      const readyz = await (
        await fetch(`http://127.0.0.1:${String(ports.health)}/readyz?verbose`)
      ).text();
      const check = await execFileAsync(
        process.execPath,
        ['--import', 'tsx', join(root, 'cli', 'main.ts'), 'config', 'check', configPath],
        { cwd: root, env },
      ).catch((err: unknown) => err as { stdout: string; stderr: string });
      const api: Record<string, string> = {};
      for (const url of [
        '/api/overview',
        '/api/state',
        '/api/logs',
        '/api/logs/facets',
        `/api/sessions/${session}/timeline`,
      ]) {
        const res = await web.inject({ method: 'GET', url });
        api[`HTTP ${url}`] = res.body;
      }
      child.kill('SIGTERM');
      await once(child, 'exit');
      await web.close();
      await gateway.close();
      const store: Record<string, string> = {};
      for (const file of await readdir(dir)) {
        if (file.startsWith('gateway.sqlite')) {
          store[`SQLite ${file}`] = (await readFile(join(dir, file))).toString('latin1');
        }
      }
      expect(Object.keys(store)).toContain('SQLite gateway.sqlite');
      paths = { state: stateAdvertised, query: queryAnswered };
      return {
        collectorLog: output,
        gatewayLog: gatewayLog.raw.join(''),
        metrics,
        readyz,
        configCheck: `${check.stdout}${check.stderr}`,
        queryAnswer: Buffer.from(answer.payload).toString('utf8'),
        ...api,
        ...store,
      };
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      await web.close().catch(() => undefined);
      await gateway.close().catch(() => undefined);
    }
  }

  const canaries = () => ({
    tenantToken: spellings(CANARY_TENANT),
    bearerToken: [bearerToken, bearerToken.split('.')[2] ?? ''],
    secretValue: spellings(CANARY_SECRET),
  });

  it('security.profile strict: no canary in any log, endpoint, answer or the store', async () => {
    const outputs = await scan('strict');
    // The scan scanned something: the process logged at trace, and where the Secret's paths
    // exist, the answer and the store hold the Secret (its name), not its value.
    expect(outputs['collectorLog']).toContain('collector started');
    expect(outputs['gatewayLog']).toContain('"level":');
    if (paths.query) expect(outputs['queryAnswer']).toContain(SECRET_NAME);
    expect(findings(outputs, canaries())).toEqual([]);
  });

  it('security.profile default: only the Secret value reaches the gateway (the seed decision)', async () => {
    const outputs = await scan('default');
    const found = findings(outputs, canaries());
    // The control: where a path carries the Secret, its value is found there, so a leak would be.
    expect(found).toEqual(
      expect.arrayContaining([
        ...(paths.query ? ['secretValue in queryAnswer'] : []),
        ...(paths.state ? ['secretValue in SQLite gateway.sqlite'] : []),
      ]),
    );
    // Only gateway-side copies of the Secret value: never in a log, /metrics, /readyz or
    // config check; never a token anywhere.
    expect(
      found.filter(
        (where) =>
          !/^secretValue in (SQLite gateway\.sqlite.*|queryAnswer|HTTP \/api\/state)$/.test(where),
      ),
    ).toEqual([]);
  });
});
