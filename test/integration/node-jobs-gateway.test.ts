// Node jobs end to end through the demo gateway: the gateway signs a drain as the platform would
// and sends it on Connect; the collector's session and node job router relay it to a real
// executor on a real Unix socket, which drains a kwok node of the real API server with a
// ServiceAccount bound to exactly the chart's rbac.nodeOps grants. The per-pod progress and the
// result come back to the gateway; the audit record through the collector's buffer. An unsigned
// request is refused with its code on the wire, and a slow drain (held by a PodDisruptionBudget)
// does not hold up anything else on the stream.
import { AppsV1Api, CoreV1Api, PolicyV1Api, type V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createNodeJobRouter,
  type NodeJobRouter,
} from '../../collector/executor-client/node-job-router.js';
import { startHarness, until, type Harness } from '../helpers/gateway-harness.js';
import {
  createTestNamespace,
  eventually,
  loadKubeConfig,
  TEST_LABEL,
  uniqueName,
  type TestNamespace,
} from '../helpers/kube.js';
import {
  removeServiceAccountGrants,
  serviceAccountKubeConfig,
  startTestExecutor,
  type TestExecutor,
} from '../helpers/node-job-executor.js';

const kc = loadKubeConfig(inject('kubeconfigPath'));
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const policy = kc.makeApiClient(PolicyV1Api);

/** Exactly the chart's rbac.nodeOps grants (helm/kubexa-agent/templates/executor-rbac.yaml). */
const NODE_OPS_RULES = [
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
  { apiGroups: [''], resources: ['pods/eviction'], verbs: ['create'] },
  { apiGroups: ['apps'], resources: ['daemonsets'], verbs: ['get'] },
];
const TAINT_KEY = 'kubexa.io/gateway-drain-test';
const fixture = uniqueName('gwdrain');

let ns: TestNamespace;
let h: Harness;
let executor: TestExecutor;
let router: NodeJobRouter;
const nodesMade: string[] = [];

async function makeNode(prefix: string): Promise<string> {
  const name = uniqueName(`${fixture}-${prefix}`);
  const body: V1Node = {
    metadata: {
      name,
      annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
      labels: { type: 'kwok-drain', 'kubernetes.io/hostname': name, [TEST_LABEL]: 'true' },
    },
    spec: { taints: [{ key: TAINT_KEY, value: 'true', effect: 'NoSchedule' }] },
    status: {
      addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
      allocatable: { cpu: '32', memory: '256Gi', pods: '110' },
      capacity: { cpu: '32', memory: '256Gi', pods: '110' },
    },
  };
  await core.createNode({ body });
  nodesMade.push(name);
  await eventually(
    `node ${name} Ready`,
    async () => {
      const node = await core.readNode({ name });
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
        ? true
        : undefined;
    },
    { timeoutMs: 60_000 },
  );
  return name;
}

async function deploymentOn(name: string, node: string, replicas = 1): Promise<void> {
  await apps.createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name },
      spec: {
        replicas,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            containers: [{ name: 'app', image: 'registry.invalid/app:1' }],
            tolerations: [{ key: TAINT_KEY, operator: 'Exists' }],
            nodeSelector: { 'kubernetes.io/hostname': node },
            terminationGracePeriodSeconds: 1,
          },
        },
      },
    },
  });
  await eventually(
    `${String(replicas)} running pods of ${name}`,
    async () => {
      const pods = await core.listNamespacedPod({
        namespace: ns.name,
        labelSelector: `app=${name}`,
      });
      return pods.items.filter((p) => p.status?.phase === 'Running').length === replicas
        ? true
        : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}

const isCordoned = async (node: string) =>
  (await core.readNode({ name: node })).spec?.unschedulable === true;

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'gw-node-jobs');
  const executorKc = await serviceAccountKubeConfig(kc, ns.name, 'executor', NODE_OPS_RULES);
  // Bound late: the executor trusts this harness's demo gateway key.
  h = await startHarness({
    stream: {
      identity: {
        tenantToken: 'tenant-secret-0123456789',
        agentVersion: '0.1.0-test',
        clusterId: '6f1c2a4e-0000-4000-8000-000000000001',
        agentId: 'agent-under-test',
        capabilities: { logs: false, state: false, metrics: false, nodeJobs: true },
      },
    },
    deps: {
      nodeJobHandler: (request, answer) => {
        router.handle(request, answer);
      },
    },
  });
  executor = await startTestExecutor({
    kc: executorKc,
    configYaml: `
mutate:
  node:
    enabled: true
    nodes: ["${fixture}-*"]
    verbs: [cordon, uncordon, drain]
    max_timeout_sec: 120
`,
    trustKey: h.gateway.commandSigner,
    retryDelayMs: 500,
    pollIntervalMs: 250,
  });
  router = createNodeJobRouter({
    socketPath: executor.socketPath,
    logger: pino({ level: 'silent' }),
    enqueue: (item) => {
      h.buffer.enqueue(item);
    },
  });
});

afterAll(async () => {
  await router.service.close();
  await executor.close();
  await h[Symbol.asyncDispose]();
  for (const name of nodesMade) await core.deleteNode({ name }).catch(() => undefined);
  await removeServiceAccountGrants(kc, ns.name, 'executor');
  await ns.delete();
});

describe('node jobs through the demo gateway and the collector', () => {
  it('a signed drain reaches the executor, its per-pod progress reaches the gateway, the node ends cordoned', async () => {
    const node = await makeNode('drain');
    await deploymentOn('web', node, 2);
    const session = await h.gateway.waitForSession();
    const job = h.gateway.nodeJobs.run(session.sessionId, {
      node,
      verb: 'drain',
      timeoutSeconds: 60,
    });
    const done = await h.gateway.nodeJobs.waitForDone(job.id);
    expect(done.done).toMatchObject({ outcome: 'succeeded', cordoned: true, evictedCount: 2 });
    expect(done.started?.principal).toBe('demo-user@kubexa.local');
    // Each pod's steps, in order, as the executor streamed them.
    const pods = new Map<string, string[]>();
    for (const pod of done.pods) pods.set(pod.name, [...(pods.get(pod.name) ?? []), pod.phase]);
    expect(pods.size).toBe(2);
    for (const phases of pods.values()) expect(phases).toEqual(['evicting', 'evicted', 'deleted']);
    expect(await isCordoned(node)).toBe(true);
    await until(
      () => h.gateway.nodeJobs.audits.some((a) => a.requestId === job.id),
      'the audit record',
    );
    expect(h.gateway.nodeJobs.audits.find((a) => a.requestId === job.id)).toMatchObject({
      event: 'node_job',
      verb: 'drain',
      target: `node/${node}`,
      outcome: 'succeeded',
      principal: 'demo-user@kubexa.local',
    });
  });

  it('an unsigned request is refused with its code on the wire and changes nothing', async () => {
    const node = await makeNode('unsigned');
    const session = await h.gateway.waitForSession();
    const job = h.gateway.nodeJobs.run(session.sessionId, { node, verb: 'cordon', unsigned: true });
    const done = await h.gateway.nodeJobs.waitForDone(job.id);
    expect(done.done).toMatchObject({ outcome: 'refused', refusalCode: 'SIGNATURE_INVALID' });
    expect(done.done?.message).not.toBe('');
    expect(done.pods).toEqual([]);
    expect(await isCordoned(node)).toBe(false);
  });

  it('a slow drain holds up nothing: a second job is answered at once, and the cancel ends the drain', async () => {
    const node = await makeNode('pdb');
    await deploymentOn('guarded', node);
    await policy.createNamespacedPodDisruptionBudget({
      namespace: ns.name,
      body: {
        metadata: { name: 'guarded-pdb' },
        spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } },
      },
    });
    await eventually(
      'the PDB computed',
      async () => {
        const pdb = await policy.readNamespacedPodDisruptionBudget({
          name: 'guarded-pdb',
          namespace: ns.name,
        });
        return pdb.status?.currentHealthy === 1 &&
          pdb.status.observedGeneration === pdb.metadata?.generation
          ? true
          : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const session = await h.gateway.waitForSession();
    const slow = h.gateway.nodeJobs.run(session.sessionId, {
      node,
      verb: 'drain',
      timeoutSeconds: 120,
    });
    await until(
      () =>
        h.gateway.nodeJobs.get(slow.id)?.pods.some((p) => p.phase === 'blocked_by_pdb') === true,
      'the drain blocked by the PDB',
    );
    // Meanwhile: another job is answered at once (one job at a time)...
    const second = h.gateway.nodeJobs.run(session.sessionId, { node, verb: 'uncordon' });
    const refused = await h.gateway.nodeJobs.waitForDone(second.id);
    expect(refused.done?.refusalCode).toBe('LIMIT_REACHED');
    expect(h.gateway.nodeJobs.get(slow.id)?.state).toBe('running');
    // ...and the cancel reaches the executor: the drain ends cancelled, the node stays cordoned.
    expect(h.gateway.nodeJobs.cancel(slow.id)).toBe(true);
    const cancelled = await h.gateway.nodeJobs.waitForDone(slow.id);
    expect(cancelled.done).toMatchObject({ outcome: 'cancelled', cordoned: true });
    expect(cancelled.done?.pending.length).toBe(1);
    expect(await isCordoned(node)).toBe(true);
  });
});
