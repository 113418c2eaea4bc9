// An executor with consoles on, in this process, for tests: its own identity (a ServiceAccount
// token minted here with the RBAC the chart grants for rbac.exec, or less), its own exec.pod
// config and command keys, listening on a fresh Unix socket.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type AuthenticationV1TokenRequest,
} from '@kubernetes/client-node';
import { createCommandGuard, type GateName } from '../../executor/guard/authorize-command.js';
import { createCommandVerifier, loadCommandKeys } from '../../executor/guard/verify-command.js';
import { createExecutorServer } from '../../executor/server/executor-server.js';
import {
  createPodConsoles,
  resumeWindowMs,
  type ExecPodConfig,
} from '../../executor/sessions/pod-consoles.js';
import {
  createSessionManager,
  type SessionManager,
} from '../../executor/sessions/session-manager.js';
import { Gate, type ExecutorServiceClient } from '../../proto/index.js';
import { systemClock } from '../../shared/clock.js';
import { consoleClient } from './console-stream.js';
import { captureLogger } from './executor-socket.js';

/** A ServiceAccount's own kubeconfig: the admin's cluster, the account's token. */
export async function serviceAccountIdentity(
  admin: KubeConfig,
  namespace: string,
  name: string,
  execAllowed: boolean,
): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  const rules = [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }];
  // As the chart's rbac.exec grants it: the upgrade is a GET, create is checked since 1.35.
  if (execAllowed) {
    rules.push({ apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] });
  }
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name }, rules } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const request: AuthenticationV1TokenRequest = {
    spec: { audiences: [], expirationSeconds: 3600 },
  };
  const token = await core.createNamespacedServiceAccountToken({ name, namespace, body: request });
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('no cluster in the admin kubeconfig');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token ?? '' }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}

export interface RunningExecutor {
  readonly socketPath: string;
  readonly client: ExecutorServiceClient;
  readonly sessions: SessionManager;
  readonly auditLines: () => Record<string, unknown>[];
  close(): Promise<void>;
}

export interface TestExecutorOptions {
  readonly kube: KubeConfig;
  /** The namespace the default rule allows (pods named console-*). */
  readonly namespace: string;
  readonly commandKey: { readonly id: string; readonly publicKeyPem: string };
  readonly pod?: Partial<ExecPodConfig>;
  readonly gates?: GateName[];
}

export async function startTestExecutor(options: TestExecutorOptions): Promise<RunningExecutor> {
  const gates = options.gates ?? ['podExec'];
  const dir = await mkdtemp(join(tmpdir(), 'kubexa-console-'));
  const socketPath = join(dir, 'executor', 'executor.sock');
  const config: ExecPodConfig = {
    enabled: gates.includes('podExec'),
    rules: [
      { id: 'test-pods', namespace: options.namespace, names: ['console-*'], containers: [] },
    ],
    default_shell: '/bin/sh',
    max_session_sec: 3600,
    max_sessions: 4,
    resume_window_sec: 60,
    ...options.pod,
  };
  const { logger, lines } = captureLogger();
  const guard = createCommandGuard(
    createCommandVerifier({
      keys: loadCommandKeys([
        { id: options.commandKey.id, public_key: options.commandKey.publicKeyPem },
      ]),
      clock: systemClock,
    }),
    new Set(gates),
  );
  const audit = (record: unknown) => {
    logger.info({ audit: record }, 'console audit');
  };
  const sessions = createSessionManager(
    {
      maxSessions: config.max_sessions,
      maxSessionMs: config.max_session_sec * 1000,
      resumeWindowMs: resumeWindowMs(config.resume_window_sec),
      outputWindowBytes: 1024 * 1024,
      maxChunkBytes: 32 * 1024,
    },
    { logger, audit },
  );
  const server = createExecutorServer(
    {
      socketPath,
      ownUid: process.getuid?.() ?? -1,
      // GetCapabilities reports pod exec on when it is: the collector advertises consoles then.
      enabledGates: gates.includes('podExec') ? [Gate.GATE_POD_EXEC] : [],
      guard,
      shutdownTimeoutMs: 2000,
      consoles: {
        pods: createPodConsoles({ config, guard, kube: options.kube, sessions }),
        sessions,
        logger,
        audit,
      },
    },
    { logger },
  );
  await server.start(new AbortController().signal);
  const client = consoleClient(socketPath);
  return {
    socketPath,
    client,
    sessions,
    auditLines: () => lines().filter((line) => line['msg'] === 'console audit'),
    async close() {
      client.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
