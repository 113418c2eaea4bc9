// An executor with node jobs and mutations, in this process, on a real Unix socket, reaching the
// real API server with a ServiceAccount's token; and a client that talks straight to its socket,
// as the collector (or a compromised collector) would. Commands are signed with a key made here.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import {
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import {
  ExecutorServiceClient,
  type ApplyMutationRequest,
  type ApplyMutationResponse,
  type NodeJobResult,
  type NodePodProgress,
  type NodeJobStarted,
  type RunNodeJobRequest,
} from '../../proto/index.js';
import { loadConfig } from '../../shared/config/load-config.js';
import type { Service } from '../../shared/lifecycle/service.js';
import { systemClock } from '../../shared/clock.js';
import type { CommandClaims } from '../../shared/signed-command/claims.js';
import {
  generateCommandKeyPair,
  newCommandNonce,
  signCommand,
  type CommandKeyPair,
} from '../../shared/signed-command/sign-command.js';
import { createCommandGuard } from '../../executor/guard/authorize-command.js';
import { enabledGateNames } from '../../executor/guard/enabled-gates.js';
import { createCommandVerifier, loadCommandKeys } from '../../executor/guard/verify-command.js';
import { createNodeApi } from '../../executor/jobs/node-api.js';
import { createNodeJobService } from '../../executor/jobs/node-job-service.js';
import { createKubeHttp } from '../../executor/kube/kube-http.js';
import {
  commandResource,
  createMutationService,
} from '../../executor/mutations/mutation-service.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';

export const KEY_ID = 'test-key';

/** A ServiceAccount in `namespace` bound cluster-wide to `rules`, and a KubeConfig with its token. */
export async function serviceAccountKubeConfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
  rules: readonly V1PolicyRule[],
): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  const roleName = `${namespace}-${name}`;
  if (rules.length > 0) {
    await rbac.createClusterRole({ body: { metadata: { name: roleName }, rules: [...rules] } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: roleName },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      },
    });
  }
  const token = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('no current cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token ?? '' }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}

/** Removes the ClusterRole and binding serviceAccountKubeConfig made. */
export async function removeServiceAccountGrants(
  admin: KubeConfig,
  namespace: string,
  name: string,
) {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const roleName = `${namespace}-${name}`;
  await rbac.deleteClusterRoleBinding({ name: roleName }).catch(() => undefined);
  await rbac.deleteClusterRole({ name: roleName }).catch(() => undefined);
}

export interface JobRun {
  readonly started: NodeJobStarted | undefined;
  readonly pods: NodePodProgress[];
  readonly result: NodeJobResult;
}

export interface TestExecutor {
  readonly socketPath: string;
  readonly client: ExecutorServiceClient;
  readonly keys: CommandKeyPair;
  readonly logLines: () => Record<string, unknown>[];
  /** Signs claims for a request (overrides change any claim, e.g. another node). */
  sign(
    claims: Partial<CommandClaims> & Pick<CommandClaims, 'target' | 'verb' | 'request_id'>,
  ): string;
  /** A signed node job request (the signature matches it unless `claims` says otherwise). */
  nodeJob(
    node: string,
    verb: string,
    extra?: Partial<RunNodeJobRequest>,
    claims?: Partial<CommandClaims>,
  ): RunNodeJobRequest;
  /** Runs a job to its result; `onEvent` sees each pod event as it arrives. */
  runJob(request: RunNodeJobRequest, onPod?: (pod: NodePodProgress) => void): Promise<JobRun>;
  cancelJob(jobId: string): Promise<boolean>;
  mutation(
    fields: Partial<ApplyMutationRequest>,
    claims?: Partial<CommandClaims>,
  ): ApplyMutationRequest;
  applyMutation(request: ApplyMutationRequest): Promise<ApplyMutationResponse>;
  close(): Promise<void>;
}

let counter = 0;
export const requestId = (prefix: string) =>
  `${prefix}-${String(process.pid)}-${String(++counter)}-${String(Date.now())}`;

export async function startTestExecutor(options: {
  kc: KubeConfig;
  /** The executor's config file (YAML): its mutate section matters here. */
  configYaml: string;
  self?: { namespace: string; name: string };
  retryDelayMs?: number;
  pollIntervalMs?: number;
  /** Another signer's public key to trust beside the helper's own (e.g. a demo gateway's). */
  trustKey?: { readonly keyId: string; readonly publicKeyPem: string };
}): Promise<TestExecutor> {
  const keys = generateCommandKeyPair();
  const keyEntry = (id: string, pem: string) =>
    `    - id: ${id}\n      public_key: |\n${pem
      .trim()
      .split('\n')
      .map((line) => `        ${line}`)
      .join('\n')}\n`;
  const { config } = loadConfig({
    fileText: `${options.configYaml}\nsecurity:\n  command_keys:\n${keyEntry(KEY_ID, keys.publicKeyPem)}${
      options.trustKey === undefined
        ? ''
        : keyEntry(options.trustKey.keyId, options.trustKey.publicKeyPem)
    }`,
    env: {},
    role: 'executor',
  });
  const lines: Record<string, unknown>[] = [];
  const logger: Logger = pino(
    { level: 'info' },
    {
      write(chunk: string) {
        for (const line of chunk.split('\n'))
          if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  const guard = createCommandGuard(
    createCommandVerifier({
      keys: loadCommandKeys(config.security.command_keys),
      clock: systemClock,
    }),
    enabledGateNames(config),
  );
  const kube = createKubeHttp(options.kc);
  const nodeJobs = createNodeJobService({
    config: config.mutate.node,
    guard,
    api: createNodeApi(kube),
    self: options.self,
    clock: systemClock,
    logger,
    ...(options.retryDelayMs === undefined ? {} : { retryDelayMs: options.retryDelayMs }),
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
  });
  const mutations = createMutationService({
    config: config.mutate,
    guard,
    kube,
    clock: systemClock,
    logger,
  });
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-nodejobs-'));
  const socketPath = join(dir, 'run', 'executor.sock');
  const server: Service = createExecutorServer(
    {
      socketPath,
      ownUid: process.getuid?.() ?? -1,
      enabledGates: [],
      guard,
      shutdownTimeoutMs: 2_000,
      nodeJobs,
      mutations,
    },
    { logger },
  );
  await server.start(new AbortController().signal);
  const client = new ExecutorServiceClient(`unix://${socketPath}`, credentials.createInsecure());

  const sign: TestExecutor['sign'] = (claims) => {
    const nowSec = Math.floor(Date.now() / 1000);
    return signCommand(
      {
        principal: 'ops@example.com',
        permission: 'cluster:node_write',
        iat: nowSec,
        exp: nowSec + 120,
        nonce: newCommandNonce(),
        ...claims,
      },
      { keyId: KEY_ID, privateKey: keys.privateKeyPem },
    );
  };

  return {
    socketPath,
    client,
    keys,
    logLines: () => lines,
    sign,
    nodeJob(node, verb, extra = {}, claims = {}) {
      const id = extra.requestId ?? requestId(verb);
      return {
        requestId: id,
        node,
        verb,
        dryRun: false,
        command: {
          jws: sign({
            request_id: id,
            verb,
            target: { kind: 'node', namespace: '', name: node, container: '', resource: '' },
            ...claims,
          }),
        },
        ...extra,
      };
    },
    runJob(request, onPod) {
      return new Promise((resolve, reject) => {
        const pods: NodePodProgress[] = [];
        let started: NodeJobStarted | undefined;
        let result: NodeJobResult | undefined;
        const call = client.runNodeJob(request, new Metadata());
        call.on('data', (event: { event?: { $case: string; value: unknown } }) => {
          const e = event.event;
          if (e?.$case === 'started') started = e.value as NodeJobStarted;
          if (e?.$case === 'pod') {
            pods.push(e.value as NodePodProgress);
            onPod?.(e.value as NodePodProgress);
          }
          if (e?.$case === 'result') result = e.value as NodeJobResult;
        });
        call.on('error', reject);
        call.on('end', () => {
          if (result === undefined) reject(new Error('the job stream ended without a result'));
          else resolve({ started, pods, result });
        });
      });
    },
    cancelJob(jobId) {
      return new Promise((resolve, reject) => {
        client.cancelNodeJob(
          { requestId: requestId('cancel'), jobId },
          (err: ServiceError | null, response) => {
            if (err !== null) reject(err);
            else resolve(response.cancelled);
          },
        );
      });
    },
    mutation(fields, claims = {}) {
      const base: ApplyMutationRequest = {
        requestId: requestId('mutation'),
        verb: 'patch',
        group: '',
        version: 'v1',
        resource: 'configmaps',
        namespace: '',
        name: '',
        body: Buffer.alloc(0),
        patchType: 0,
        replicas: 0,
        propagationPolicy: '',
        dryRun: false,
        fieldManager: '',
        force: false,
        ...fields,
      };
      return {
        ...base,
        command: {
          jws: sign({
            request_id: base.requestId,
            verb: base.verb,
            target: {
              kind: 'resource',
              namespace: base.namespace,
              name: base.name,
              container: '',
              resource: commandResource(base.group, base.resource),
            },
            ...claims,
          }),
        },
      };
    },
    applyMutation(request) {
      return new Promise((resolve, reject) => {
        client.applyMutation(request, (err: ServiceError | null, response) => {
          if (err !== null) reject(err);
          else resolve(response);
        });
      });
    },
    async close() {
      client.close();
      await nodeJobs.close();
      await server.close();
      kube.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
