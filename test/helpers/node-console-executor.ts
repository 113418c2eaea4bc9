// Node consoles for tests: the executor as a real process (its own config file, its own
// ServiceAccount with the rbac.nodeShell Role as the chart grants it, killable with SIGKILL),
// opens signed as the platform signs them, and the helper Pods a release has on the cluster.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { helperSelector } from '../../executor/node-console/boot-sweep.js';
import type { ExecutorServiceClient } from '../../proto/index.js';
import type { CommandPermission } from '../../shared/signed-command/claims.js';
import {
  newCommandNonce,
  signCommand,
  type CommandKeyPair,
} from '../../shared/signed-command/sign-command.js';
import { consoleClient, ConsoleStreamClient } from './console-stream.js';
import { eventually } from './kube.js';

/** The rbac.nodeShell Role's rules (helm/kubexa-agent/templates/_rbac-scope.tpl). */
export const NODE_SHELL_RULES = [
  { apiGroups: [''], resources: ['pods'], verbs: ['create', 'get', 'list', 'watch', 'delete'] },
  { apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] },
  { apiGroups: [''], resources: ['events'], verbs: ['list'] },
];

/**
 * A ServiceAccount in `home` with the rbac.nodeShell rules in each of `grantIn`, as a kubeconfig
 * file the executor process loads (KUBECONFIG).
 */
export async function nodeShellIdentity(
  admin: KubeConfig,
  account: { readonly home: string; readonly name: string },
  grantIn: readonly string[],
  dir: string,
): Promise<string> {
  const { home, name } = account;
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace: home, body: { metadata: { name } } });
  for (const namespace of grantIn) {
    await rbac.createNamespacedRole({
      namespace,
      body: { metadata: { name }, rules: NODE_SHELL_RULES },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'ServiceAccount', name, namespace: home }],
      },
    });
  }
  const token = await core.createNamespacedServiceAccountToken({
    name,
    namespace: home,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('no cluster in the admin kubeconfig');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token ?? '' }],
    contexts: [{ name, cluster: cluster.name, user: name, namespace: home }],
    currentContext: name,
  });
  const path = join(dir, `${name}.kubeconfig`);
  await writeFile(path, kc.exportConfig(), { mode: 0o600 });
  return path;
}

export interface NodeConsoleExecutorOptions {
  readonly kubeconfigPath: string;
  /** The executor's config file (exec.node, exec.pod, security.command_keys). */
  readonly config: Record<string, unknown>;
  readonly release: string;
  readonly releaseNamespace: string;
  /** NODE_OPTIONS for the process (e.g. the image's V8 sizing); default: this process's. */
  readonly nodeOptions?: string;
  /** node arguments before the executor's own (e.g. --expose-gc). */
  readonly nodeArgs?: readonly string[];
}

export class NodeConsoleExecutor {
  readonly child: ChildProcess;
  readonly socketPath: string;
  readonly client: ExecutorServiceClient;
  #output = '';

  constructor(child: ChildProcess, socketPath: string) {
    this.child = child;
    this.socketPath = socketPath;
    this.client = consoleClient(socketPath);
    child.stdout?.on('data', (chunk: Buffer) => (this.#output += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => (this.#output += chunk.toString('utf8')));
  }

  output(): string {
    return this.#output;
  }

  /** The executor's JSON log lines. */
  lines(): Record<string, unknown>[] {
    return this.#output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /** SIGTERM (a clean stop) or SIGKILL (nothing runs after it); resolves on exit. */
  async stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<number | null> {
    this.client.close();
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    const exited = once(this.child, 'exit') as Promise<[number | null]>;
    this.child.kill(signal);
    const [code] = await exited;
    return code;
  }
}

const dirs: string[] = [];

/** Starts executor/main.ts with the options' config; resolves once the boot sweep is done. */
export async function startNodeConsoleExecutor(
  options: NodeConsoleExecutorOptions,
): Promise<NodeConsoleExecutor> {
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-node-console-'));
  dirs.push(dir);
  const configPath = join(dir, 'config.yaml');
  const socketPath = join(dir, 'executor', 'executor.sock');
  await writeFile(configPath, stringify(options.config));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: options.kubeconfigPath,
    KUBEXA_EXECUTOR_SOCKET: socketPath,
    KUBEXA_RELEASE_NAME: options.release,
    KUBEXA_POD_NAMESPACE: options.releaseNamespace,
  };
  delete env['KUBERNETES_SERVICE_HOST'];
  delete env['KUBEXA_COLLECTOR_TOKEN_DIR'];
  if (options.nodeOptions !== undefined) env['NODE_OPTIONS'] = options.nodeOptions;
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), '--import', 'tsx', 'executor/main.ts', `--config=${configPath}`],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const executor = new NodeConsoleExecutor(child, socketPath);
  await eventually(
    'the executor started (socket up, boot sweep done)',
    async () => {
      if (child.exitCode !== null) throw new Error(`executor exited: ${executor.output()}`);
      const socket = await stat(socketPath).catch(() => undefined);
      return socket?.isSocket() === true && executor.output().includes('executor started')
        ? true
        : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}\nexecutor output:\n${executor.output()}`);
  });
  return executor;
}

export async function removeExecutorDirs(): Promise<void> {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
}

/** The platform's signature over a node console open. */
export function signNodeConsole(
  signer: { readonly key: CommandKeyPair; readonly keyId: string },
  requestId: string,
  node: string,
  over: { permission?: CommandPermission; kind?: string; principal?: string } = {},
): string {
  const { key, keyId } = signer;
  const nowSec = Math.floor(Date.now() / 1000);
  return signCommand(
    {
      request_id: requestId,
      principal: over.principal ?? 'root-admin@example.com',
      permission: over.permission ?? 'cluster:node_console',
      target: { kind: over.kind ?? 'node', namespace: '', name: node, container: '', resource: '' },
      verb: 'console',
      iat: nowSec,
      exp: nowSec + 60,
      nonce: newCommandNonce(),
    },
    { keyId, privateKey: key.privateKeyPem },
  );
}

let counter = 0;

/** Opens a node console on the socket, as a collector relays it (or forges it). */
export function openNodeConsole(
  client: ExecutorServiceClient,
  node: string,
  sign: (requestId: string) => string,
  options: { command?: string[]; tty?: boolean; target?: Record<string, string> } = {},
): ConsoleStreamClient {
  counter += 1;
  const requestId = `node-req-${process.pid}-${counter}`;
  const stream = new ConsoleStreamClient(client);
  stream.send({
    input: {
      $case: 'open',
      value: {
        requestId,
        target: {
          kind: 'node',
          namespace: '',
          name: node,
          container: '',
          resource: '',
          ...options.target,
        },
        command: options.command ?? [],
        tty: options.tty ?? false,
        commandSignature: { jws: sign(requestId) },
      },
    },
  });
  return stream;
}

/** This release's helper Pods (not being deleted) in a namespace. */
export async function liveHelpers(
  core: CoreV1Api,
  namespace: string,
  release: string,
): Promise<V1Pod[]> {
  const list = await core.listNamespacedPod({ namespace, labelSelector: helperSelector(release) });
  return list.items.filter((pod) => pod.metadata?.deletionTimestamp === undefined);
}
