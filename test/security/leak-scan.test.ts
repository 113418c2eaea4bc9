// Secret-leak scan: canary credentials go through the real processes at trace level, then every
// output is searched for them: the collector's logs, /metrics, /readyz?verbose, `config check`,
// the demo gateway's own log, and the executor's logs and capability answer while it
// authenticates with a real ServiceAccount token and refuses and accepts signed commands.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { credentials, Metadata } from '@grpc/grpc-js';
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { DemoGateway } from '../../demo-gateway/demo-gateway.js';
import { ExecutorServiceClient, type AuthorizeCommandRequest } from '../../proto/index.js';
import {
  generateCommandKeyPair,
  newCommandNonce,
  signCommand,
} from '../../shared/signed-command/sign-command.js';
import { createExecutorClient } from '../../collector/executor-client/executor-client.js';
import { captureLogs } from '../helpers/gateway-harness.js';
import { createTestNamespace, eventually, loadKubeConfig } from '../helpers/kube.js';

const execFileAsync = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CANARY_TENANT = 'kubexa-canary-tenant-7f3e9b21c4d8a6e5';

interface Started {
  readonly child: ChildProcess;
  readonly output: () => string;
}

function startProcess(script: string, configPath: string, env: NodeJS.ProcessEnv): Started {
  const child = spawn(process.execPath, ['--import', 'tsx', script, `--config=${configPath}`], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  return { child, output: () => output };
}

/**
 * A ServiceAccount in `namespace` allowed what exec.pod needs, and a kubeconfig that reads its
 * real token from a file (as in-cluster config reads the projected one).
 */
async function tokenKubeconfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
  dir: string,
): Promise<{ token: string; kubeconfigPath: string; removeRbac: () => Promise<void> }> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  // Cluster-wide, as the executor reviews pod_exec (its config's rules narrow it, not RBAC here).
  const roleName = `${namespace}-${name}`;
  await rbac.createClusterRole({
    body: {
      metadata: { name: roleName },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: [''], resources: ['pods/exec'], verbs: ['create', 'get'] },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: roleName },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const removeRbac = async () => {
    await rbac.deleteClusterRoleBinding({ name: roleName }).catch(() => undefined);
    await rbac.deleteClusterRole({ name: roleName }).catch(() => undefined);
  };
  const minted = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const token = minted.status?.token ?? '';
  const tokenFile = join(dir, 'sa-token');
  await writeFile(tokenFile, token, { mode: 0o600 });
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('kubeconfig has no current cluster');
  const kubeconfigPath = join(dir, 'executor-kubeconfig.json');
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
              ? { 'certificate-authority': cluster.caFile }
              : { 'certificate-authority-data': cluster.caData }),
          },
        },
      ],
      users: [{ name: 'u', user: { 'token-file': tokenFile } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u', namespace } }],
      'current-context': 'x',
    }),
  );
  return { token, kubeconfigPath, removeRbac };
}

describe('secret-leak scan', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function tempDir(prefix: string) {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    return dir;
  }

  it('the tenant token appears in no collector log line at trace, /metrics, /readyz?verbose or config check', async () => {
    const gatewayLog = captureLogs('trace');
    const gateway = new DemoGateway({ acceptToken: CANARY_TENANT }, { logger: gatewayLog.logger });
    const port = await gateway.listen('127.0.0.1', 0);
    cleanups.push(() => gateway.close());
    const dir = await tempDir('kubexa-leak-');
    const configPath = join(dir, 'config.yaml');
    await writeFile(
      configPath,
      [
        'gateway:',
        `  address: 127.0.0.1:${port}`,
        '  tls: false',
        '  allow_insecure: true',
        'buffer:',
        `  spill_dir: ${JSON.stringify(join(dir, 'data'))}`,
        'observability:',
        '  health_addr: "127.0.0.1:0"',
        '  metrics_addr: "127.0.0.1:0"',
        'log:',
        '  level: trace',
        '',
      ].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: inject('kubeconfigPath'),
      KUBEXA_TENANT_TOKEN: CANARY_TENANT,
    };
    delete env['KUBERNETES_SERVICE_HOST'];
    const collector = startProcess(join(root, 'collector', 'main.ts'), configPath, env);
    cleanups.push(async () => {
      const { child } = collector;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await once(child, 'exit');
    });
    await gateway.waitForSession();
    const started = await eventually(
      'the collector started line',
      () =>
        Promise.resolve(
          collector
            .output()
            .split('\n')
            .find((line) => line.includes('"collector started"')),
        ),
      { timeoutMs: 60_000 },
    );
    const ports = (JSON.parse(started) as { ports: { health: number; metrics: number } }).ports;
    const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    const readyz = await (await fetch(`http://127.0.0.1:${ports.health}/readyz?verbose`)).text();
    const check = await execFileAsync(
      process.execPath,
      ['--import', 'tsx', join(root, 'cli', 'main.ts'), 'config', 'check', configPath],
      { cwd: root, env },
    ).catch((err: unknown) => err as { stdout: string; stderr: string });

    collector.child.kill('SIGTERM');
    await once(collector.child, 'exit');
    const outputs = {
      collectorLog: collector.output(),
      metrics,
      readyz,
      configCheck: `${check.stdout}${check.stderr}`,
      gatewayLog: gatewayLog.raw.join(''),
    };
    // The scan must have something to scan: the process logged at trace level (the collector
    // has few trace lines today; every level it writes is included), and the canary really went
    // through it (the gateway accepted it in the handshake above).
    expect(outputs.collectorLog).toContain('collector started');
    expect(metrics.length).toBeGreaterThan(100);
    expect(outputs.gatewayLog).toContain('"level":');
    for (const [where, text] of Object.entries(outputs)) {
      expect(text.includes(CANARY_TENANT), where).toBe(false);
    }
  });

  it('the executor logs neither the signed command, its own ServiceAccount token, nor the tenant token', async () => {
    const dir = await tempDir('kubexa-leak-exec-');
    // The executor's identity: a real ServiceAccount token in a token file, which it reads and
    // sends with its own access reviews (GetCapabilities below), as it does with its projected
    // token in the Pod.
    const admin = loadKubeConfig(inject('kubeconfigPath'));
    const ns = await createTestNamespace(admin, 'kubexa-leak-exec');
    cleanups.push(() => ns.delete());
    const identity = await tokenKubeconfig(admin, ns.name, 'leak-executor', dir);
    cleanups.push(identity.removeRbac);
    const platform = generateCommandKeyPair();
    const configPath = join(dir, 'config.yaml');
    await writeFile(
      configPath,
      [
        'exec:',
        '  pod:',
        '    enabled: true',
        '    rules:',
        `      - namespace: ${ns.name}`,
        'security:',
        '  command_keys:',
        '    - id: platform-1',
        '      public_key: |',
        ...platform.publicKeyPem
          .trim()
          .split('\n')
          .map((line) => `        ${line}`),
        'log:',
        '  level: trace',
        '',
      ].join('\n'),
    );
    const socketPath = join(dir, 'executor', 'executor.sock');
    const executorEnv: NodeJS.ProcessEnv = {
      ...process.env,
      KUBECONFIG: identity.kubeconfigPath,
      KUBEXA_EXECUTOR_SOCKET: socketPath,
      KUBEXA_TENANT_TOKEN: CANARY_TENANT,
    };
    delete executorEnv['KUBERNETES_SERVICE_HOST'];
    const executor = startProcess(join(root, 'executor', 'main.ts'), configPath, executorEnv);
    cleanups.push(() => {
      executor.child.kill('SIGKILL');
    });
    await eventually(
      'the executor socket',
      async () => ((await stat(socketPath)).isSocket() ? true : undefined),
      { timeoutMs: 30_000 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${executor.output()}`);
    });
    const client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());
    cleanups.push(() => {
      client.close();
    });
    const request: AuthorizeCommandRequest = {
      requestId: 'leak-1',
      permission: 'cluster:node_console',
      target: { kind: 'pod', namespace: 'a', name: 'b', container: 'c', resource: '' },
      verb: 'console',
    };
    const nowSec = Math.floor(Date.now() / 1000);
    const jws = signCommand(
      {
        request_id: 'leak-1',
        principal: 'alice@example.com',
        permission: 'cluster:node_console',
        target: request.target!,
        verb: 'console',
        iat: nowSec,
        exp: nowSec + 60,
        nonce: newCommandNonce(),
      },
      { keyId: 'platform-1', privateKey: platform.privateKeyPem },
    );
    const call = (command: string) =>
      new Promise<void>((resolve, reject) => {
        client.authorizeCommand(
          { ...request, command: { jws: command } },
          new Metadata(),
          (err) => {
            if (err !== null) reject(err);
            else resolve();
          },
        );
      });
    // The token goes through the executor: its reviews run on it (without a valid token they
    // fail with 401; the ClusterRole's grants come back allowed only to that ServiceAccount).
    const capabilities = await createExecutorClient(socketPath).getCapabilities(
      'leak-capabilities',
      AbortSignal.timeout(20_000),
    );
    const reviews = capabilities.gateAccess.flatMap((gate) => gate.reviews);
    expect(reviews.length).toBeGreaterThan(0);
    expect(reviews.filter((review) => review.failed)).toEqual([]);
    expect(
      reviews.every((review) => review.allowed),
      JSON.stringify(reviews),
    ).toBe(true);
    await call(jws); // accepted
    await call(jws); // replayed
    await call(`${jws}x`); // invalid
    await eventually(
      'three audit lines',
      () =>
        Promise.resolve(
          (executor.output().match(/privileged request (authorized|refused)/g) ?? []).length >= 3
            ? true
            : undefined,
        ),
      { timeoutMs: 10_000 },
    );
    executor.child.kill('SIGTERM');
    await once(executor.child, 'exit');
    const log = executor.output();
    expect(log).toContain('alice@example.com'); // the verified principal is recorded
    const outputs = { executorLog: log, capabilities: JSON.stringify(capabilities) };
    const secrets = {
      command: jws,
      commandSignature: jws.split('.')[2] ?? '',
      tenantToken: CANARY_TENANT,
      signingKey: platform.privateKeyPem,
      serviceAccountToken: identity.token,
      serviceAccountTokenSignature: identity.token.split('.')[2] ?? '',
    };
    for (const [where, text] of Object.entries(outputs)) {
      for (const [what, secret] of Object.entries(secrets)) {
        expect(secret.length, what).toBeGreaterThan(20);
        expect(text.includes(secret), `${what} in ${where}`).toBe(false);
      }
    }
  });
});
