// Proof that the harness is a real cluster: scheduling, the kubelet's logs and exec (through the
// API server's WebSocket translation), metrics.k8s.io, disruption budgets, RBAC and etcd
// compaction all behave as they do in production, seen through @kubernetes/client-node.
import { appendFile, chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  Exec,
  KubeConfig,
  Log,
  Metrics,
  PolicyV1Api,
  RbacAuthorizationV1Api,
  Watch,
  type V1Deployment,
  type V1Pod,
  type V1Status,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createTestNamespace,
  criLine,
  eventually,
  loadKubeConfig,
  serveExecLocally,
  serveLogsFromFile,
  type TestNamespace,
} from '../helpers/kube.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);

let ns: TestNamespace;
let scratch: string;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'smoke');
  scratch = await mkdtemp(join(tmpdir(), 'kubexa-smoke-'));
});

afterAll(async () => {
  await ns.delete();
  await rm(scratch, { recursive: true, force: true });
});

function deployment(name: string, replicas: number, annotations: Record<string, string> = {}) {
  const body: V1Deployment = {
    metadata: { name, namespace: ns.name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name }, annotations },
        spec: {
          containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
          // kwok nodes carry kwok's taint only when asked to; tolerate it either way.
          tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
        },
      },
    },
  };
  return apps.createNamespacedDeployment({ namespace: ns.name, body });
}

function isRunningAndReady(pod: V1Pod): boolean {
  return (
    pod.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
  );
}

async function runningPods(app: string, count: number): Promise<V1Pod[]> {
  return eventually(
    `${String(count)} running pods of ${app}`,
    async () => {
      const pods = await core.listNamespacedPod({
        namespace: ns.name,
        labelSelector: `app=${app}`,
      });
      const running = pods.items.filter(isRunningAndReady);
      return running.length === count ? running : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

async function singlePod(name: string, annotations: Record<string, string> = {}): Promise<V1Pod> {
  await core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name, namespace: ns.name, labels: { app: name }, annotations },
      spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    },
  });
  const [pod] = await runningPods(name, 1);
  return pod!;
}

function collect(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString('utf8') };
}

describe('test cluster smoke', () => {
  it('schedules a 3-replica Deployment onto kwok nodes as 3 Running pods', async () => {
    await deployment('web', 3);
    const pods = await runningPods('web', 3);
    const nodes = await core.listNode({ labelSelector: 'type=kwok' });
    const kwokNodes = new Set(nodes.items.map((node) => node.metadata?.name));
    for (const pod of pods) expect(kwokNodes.has(pod.spec?.nodeName)).toBe(true);
  });

  it('follows pod logs with timestamps: lines appended to the kwok log file arrive', async () => {
    const logsFile = join(scratch, 'app.log');
    const first = new Date(Date.now() - 2_000);
    await writeFile(logsFile, criLine(first, 'line-0 before the stream'));
    await serveLogsFromFile(kc, { namespace: ns.name, logsFile });
    const pod = await singlePod('logger');
    const out = collect();
    // kwok picks up a new ClusterLogs object asynchronously; until then the kubelet answers 400.
    const abort = await eventually(
      'kwok to serve the pod log',
      () =>
        new Log(kc).log(ns.name, pod.metadata!.name!, 'app', out.stream, {
          follow: true,
          timestamps: true,
        }),
      { timeoutMs: 20_000, intervalMs: 500 },
    );
    try {
      await eventually(
        'the existing line',
        () => Promise.resolve(out.text().includes('line-0') || undefined),
        {
          timeoutMs: 20_000,
        },
      );
      for (let i = 1; i <= 3; i += 1)
        await appendFile(logsFile, criLine(new Date(), `line-${String(i)}`));
      const text = await eventually(
        'the appended lines',
        () => Promise.resolve(out.text().includes('line-3') ? out.text() : undefined),
        { timeoutMs: 20_000 },
      );
      const lines = text.trimEnd().split('\n');
      expect(lines.map((line) => line.split(' ').slice(1).join(' '))).toEqual([
        'line-0 before the stream',
        'line-1',
        'line-2',
        'line-3',
      ]);
      // timestamps=true puts the runtime's RFC3339Nano timestamp in front of every line.
      expect(lines[0]!.split(' ')[0]).toBe(
        first.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z'),
      );
    } finally {
      abort.abort();
    }
  });

  it('execs with stdin over the WebSocket protocol and returns the output', async () => {
    const workDir = join(scratch, 'exec');
    await mkdir(workDir);
    await chmod(workDir, 0o755);
    await chmod(scratch, 0o755);
    await serveExecLocally(kc, { namespace: ns.name, workDir });
    const pod = await singlePod('shell');
    // kwok picks up a new ClusterExec object asynchronously: retry until it runs the command.
    const result = await eventually(
      'kwok to run the exec',
      async () => {
        const attempt = await execWithStdin(pod.metadata!.name!, 'hi\n');
        if (attempt.status.status === 'Success') return attempt;
        throw new Error(`exec ended with ${JSON.stringify(attempt.status)}`);
      },
      { timeoutMs: 20_000, intervalMs: 500 },
    );
    expect(result.status).toEqual({ metadata: {}, status: 'Success' });
    expect(result.stdout.trim()).toBe('got:hi');
    expect(result.stderr).toBe('');
  });

  it('serves PodMetrics from metrics.k8s.io for an annotated pod', async () => {
    const pod = await singlePod('measured', {
      'kwok.x-k8s.io/usage-cpu': '250m',
      'kwok.x-k8s.io/usage-memory': '64Mi',
    });
    const metrics = new Metrics(kc);
    const podMetrics = await eventually(
      'PodMetrics for the annotated pod',
      async () => {
        const list = await metrics.getPodMetrics(ns.name);
        return list.items.find((item) => item.metadata.name === pod.metadata!.name);
      },
      { timeoutMs: 90_000, intervalMs: 2_000 },
    );
    const usage = podMetrics.containers[0]?.usage;
    expect(usage?.memory).toBe('64Mi');
    expect(usage?.cpu).toMatch(/^\d+(n|u|m)?$/);
  });

  it('refuses an eviction with 429 when a PodDisruptionBudget allows no disruption', async () => {
    await deployment('guarded', 3);
    const pods = await runningPods('guarded', 3);
    const policy = kc.makeApiClient(PolicyV1Api);
    await policy.createNamespacedPodDisruptionBudget({
      namespace: ns.name,
      body: {
        metadata: { name: 'guarded' },
        spec: { minAvailable: 3, selector: { matchLabels: { app: 'guarded' } } },
      },
    });
    await eventually(
      'the disruption controller to observe the budget',
      async () => {
        const pdb = await policy.readNamespacedPodDisruptionBudget({
          name: 'guarded',
          namespace: ns.name,
        });
        const observed = pdb.status?.observedGeneration === pdb.metadata?.generation;
        return observed && pdb.status?.currentHealthy === 3 ? pdb : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const victim = pods[0]!.metadata!.name!;
    const eviction = core.createNamespacedPodEviction({
      name: victim,
      namespace: ns.name,
      body: { metadata: { name: victim, namespace: ns.name } },
    });
    await expect(eviction).rejects.toSatisfy(
      (err: unknown) => err instanceof ApiException && err.code === 429,
    );
  });

  it('denies a narrowly bound ServiceAccount token with 403 outside its Role', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({
      namespace: ns.name,
      body: { metadata: { name: 'narrow' } },
    });
    await rbac.createNamespacedRole({
      namespace: ns.name,
      body: {
        metadata: { name: 'pod-reader' },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns.name,
      body: {
        metadata: { name: 'narrow-pod-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'narrow', namespace: ns.name }],
      },
    });
    const tokenRequest = await core.createNamespacedServiceAccountToken({
      name: 'narrow',
      namespace: ns.name,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const narrow = new KubeConfig();
    const cluster = kc.getCurrentCluster()!;
    narrow.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'narrow', token: tokenRequest.status!.token }],
      contexts: [{ name: 'narrow', cluster: cluster.name, user: 'narrow' }],
      currentContext: 'narrow',
    });
    const narrowCore = narrow.makeApiClient(CoreV1Api);
    // Inside the Role: allowed, which proves the token authenticates.
    const pods = await narrowCore.listNamespacedPod({ namespace: ns.name });
    expect(pods.items.length).toBeGreaterThan(0);
    // Outside the Role: 403, not 401.
    await expect(narrowCore.listNamespacedSecret({ namespace: ns.name })).rejects.toSatisfy(
      (err: unknown) => err instanceof ApiException && err.code === 403,
    );
    await expect(narrowCore.listPodForAllNamespaces()).rejects.toSatisfy(
      (err: unknown) => err instanceof ApiException && err.code === 403,
    );
  });

  it('answers a watch from a compacted resourceVersion with 410 Gone', async () => {
    const created = await core.createNamespacedPodTemplate({
      namespace: ns.name,
      body: {
        metadata: { name: 'old' },
        template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } },
      },
    });
    const oldVersion = created.metadata!.resourceVersion!;
    // The API server compacts etcd every 10 s in the harness; keep writing so revisions move on.
    const status = await eventually(
      'the old resourceVersion to be compacted away',
      async () => {
        await core.createNamespacedConfigMap({
          namespace: ns.name,
          body: { metadata: { generateName: 'tick-' } },
        });
        return watchOnce(`/api/v1/namespaces/${ns.name}/podtemplates`, oldVersion);
      },
      { timeoutMs: 60_000, intervalMs: 2_000 },
    );
    expect(status.code).toBe(410);
    expect(status.reason).toBe('Expired');
  });
});

/** Runs `sh -c 'read x; echo got:$x'` in the pod with `input` on stdin over WebSocket exec. */
async function execWithStdin(podName: string, input: string) {
  const stdout = collect();
  const stderr = collect();
  const stdin = new PassThrough();
  const status = await new Promise<V1Status>((resolve, reject) => {
    new Exec(kc)
      .exec(
        ns.name,
        podName,
        'app',
        ['sh', '-c', 'read x; echo got:$x'],
        stdout.stream,
        stderr.stream,
        stdin,
        false,
        resolve,
      )
      .then(() => {
        stdin.end(input);
      })
      .catch(reject);
  });
  return { status, stdout: stdout.text(), stderr: stderr.text() };
}

/** Opens a watch from `resourceVersion`; resolves with the ERROR Status, or undefined if none. */
async function watchOnce(path: string, resourceVersion: string): Promise<V1Status | undefined> {
  return new Promise((resolve, reject) => {
    let result: V1Status | undefined;
    let controller: AbortController | undefined;
    const timer = setTimeout(() => controller?.abort(), 1_500);
    new Watch(kc)
      .watch(
        path,
        { resourceVersion, allowWatchBookmarks: false },
        (type: string, object: unknown) => {
          if (type === 'ERROR') {
            result = object as V1Status;
            controller?.abort();
          }
        },
        () => {
          clearTimeout(timer);
          resolve(result);
        },
      )
      .then((c) => {
        controller = c;
      })
      .catch((err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      });
  });
}
