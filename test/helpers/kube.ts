// Helpers shared by integration tests: a client for the harness cluster, a namespace per test,
// unique names, polling with a deadline, and kwok's per-namespace logs and exec configuration.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type V1Namespace,
} from '@kubernetes/client-node';

/** Label on everything a test creates, so a leftover is recognisable. */
export const TEST_LABEL = 'kubexa.io/test';

export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return kc;
}

/**
 * A kubeconfig of one cluster, one token user and the context joining them: what a test builds
 * for a client it points at a server of its own (a proxy, an unreachable address).
 */
export function singleClusterKubeConfig(options: {
  readonly server: string;
  readonly token: string;
  readonly caFile?: string;
  readonly skipTLSVerify?: boolean;
}): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: options.server,
        ...(options.caFile === undefined ? {} : { caFile: options.caFile }),
        ...(options.skipTLSVerify === undefined ? {} : { skipTLSVerify: options.skipTLSVerify }),
      },
    ],
    users: [{ name: 'u', token: options.token }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

/** A DNS-1123 name: the prefix plus random hex, like client-go's generateName. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** Polls `probe` until it returns a value (not undefined) or the deadline passes. */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err: unknown) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${String(options.timeoutMs)} ms: ${what}${reason}`);
    }
    await sleep(options.intervalMs ?? 250);
  }
}

export interface TestNamespace {
  readonly name: string;
  /** Deletes the namespace and does not wait for its finalization. */
  delete(): Promise<void>;
}

/**
 * A namespace labelled for the tests, returned once it admits pods: the API server refuses a pod
 * (403, "serviceaccount default not found") until the controller manager has created the
 * namespace's default ServiceAccount, which takes seconds on a loaded machine.
 */
export async function createTestNamespace(
  kc: KubeConfig,
  prefix: string,
  extraLabels: Record<string, string> = {},
): Promise<TestNamespace> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = uniqueName(prefix);
  const body: V1Namespace = {
    metadata: { name, labels: { [TEST_LABEL]: 'true', ...extraLabels } },
  };
  await core.createNamespace({ body });
  await eventually(
    `the default ServiceAccount of namespace ${name}`,
    () => core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
    { timeoutMs: 60_000 },
  );
  return {
    name,
    async delete() {
      await core.deleteNamespace({ name }).catch((err: unknown) => {
        if (!(err instanceof ApiException && err.code === 404)) throw err;
      });
    },
  };
}

const KWOK_GROUP = 'kwok.x-k8s.io';
const KWOK_VERSION = 'v1alpha1';

/**
 * Makes kwok serve every container log in `namespace` from a CRI-format file on this machine,
 * and the previous instance's log (`previous=true`) from `previousLogsFile` if given.
 */
export async function serveLogsFromFile(
  kc: KubeConfig,
  options: { namespace: string; logsFile: string; previousLogsFile?: string },
): Promise<void> {
  const previous =
    options.previousLogsFile === undefined ? {} : { previousLogsFile: options.previousLogsFile };
  await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: KWOK_GROUP,
    version: KWOK_VERSION,
    plural: 'clusterlogs',
    body: {
      apiVersion: `${KWOK_GROUP}/${KWOK_VERSION}`,
      kind: 'ClusterLogs',
      metadata: { name: `logs-${options.namespace}`, labels: { [TEST_LABEL]: 'true' } },
      spec: {
        selector: { matchNamespaces: [options.namespace] },
        logs: [{ logsFile: options.logsFile, ...previous, follow: true }],
      },
    },
  });
}

/**
 * Makes kwok run exec commands for pods in `namespace` on this machine, as the unprivileged user
 * 65534 in `workDir`: tests exec only harmless commands, and never as root.
 */
export async function serveExecLocally(
  kc: KubeConfig,
  options: { namespace: string; workDir: string },
): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
    group: KWOK_GROUP,
    version: KWOK_VERSION,
    plural: 'clusterexecs',
    body: {
      apiVersion: `${KWOK_GROUP}/${KWOK_VERSION}`,
      kind: 'ClusterExec',
      metadata: { name: `exec-${options.namespace}`, labels: { [TEST_LABEL]: 'true' } },
      spec: {
        selector: { matchNamespaces: [options.namespace] },
        execs: [
          {
            local: {
              workDir: options.workDir,
              securityContext: { runAsUser: 65534, runAsGroup: 65534 },
            },
          },
        ],
      },
    },
  });
}

/** One CRI log line as a container runtime writes it: `<RFC3339Nano> <stream> F <message>`. */
export function criLine(at: Date, message: string, stream: 'stdout' | 'stderr' = 'stdout'): string {
  const iso = at.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
  return `${iso} ${stream} F ${message}\n`;
}

/** Waits until `count` pods of `namespace` are Running (kwok makes them so within seconds). */
export async function waitForRunningPods(
  kc: KubeConfig,
  namespace: string,
  count: number,
  timeoutMs = 60_000,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await eventually(
    `${String(count)} pods running in ${namespace}`,
    async () => {
      const pods = await core.listNamespacedPod({ namespace });
      return pods.items.filter((p) => p.status?.phase === 'Running').length === count || undefined;
    },
    { timeoutMs, intervalMs: 500 },
  );
}
